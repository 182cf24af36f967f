"""``memvault mcp --read-only``: the read tools alone, on a store opened read-only.

The write tools are not listed and calling one fails; the reads work; the SQLite file
is not changed by a byte; a store that does not exist is an error, not a new file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault import Message
from tests.support.mcp_clients import MEMVAULT, Client, stdio

WRITES = ("append_messages", "summarize", "save_snapshot", "rollback")


def digest(folder: Path) -> dict[str, str]:
    """Every file of the store's folder and its SHA-256 (the database, -wal, -shm)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.name.startswith("store.db")
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ro")
    with memvault.open(f"sqlite:///{folder}/store.db") as store:
        s = store.session("user-42")
        s.append([Message.user("My name is Wang", id="m1"), Message.assistant("Hi Wang")])
        s.snapshot("greeted")
    return folder


@pytest.fixture(scope="module")
def client(folder: Path) -> Iterator[Client]:
    with stdio(
        "--url", f"sqlite:///{folder}/store.db", "--read-only", stderr=folder / "log"
    ) as client:
        yield client


def test_only_the_reads_are_listed(client: Client) -> None:
    tools = client.tools()
    assert set(tools) == {
        "read_history",
        "search_messages",
        "list_snapshots",
        "list_sessions",
        "show_log",
    }
    assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())


@pytest.mark.parametrize("tool", WRITES)
def test_a_write_tool_cannot_be_called(client: Client, folder: Path, tool: str) -> None:
    before = digest(folder)
    text = client.error(
        tool,
        session_id="user-42",
        messages=[{"role": "user", "content": "x"}],
        name="greeted",
        summary="s",
        through="m1",
    )
    assert text == f"Unknown tool: {tool}"
    assert digest(folder) == before


def test_the_reads_work_and_change_no_byte_of_the_store(client: Client, folder: Path) -> None:
    before = digest(folder)
    history = client.ok("read_history", session_id="user-42")
    assert [m["content"] for m in history["messages"]] == ["My name is Wang", "Hi Wang"]
    assert client.ok("search_messages", query="wang")["hits"]
    assert [x["name"] for x in client.ok("list_snapshots", session_id="user-42")["snapshots"]] == [
        "greeted"
    ]
    assert [i["session_id"] for i in client.ok("list_sessions")["sessions"]] == ["user-42"]
    assert [e["op"] for e in client.ok("show_log", session_id="user-42")["events"]] == [
        "append",
        "snapshot",
    ]
    assert "Hi Wang" in client.read("memvault://sessions/user-42/history")
    assert digest(folder) == before


def test_a_missing_store_is_an_error_not_a_new_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    done = subprocess.run(
        [MEMVAULT, "mcp", "--url", f"sqlite:///{missing}", "--read-only"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: ConfigurationError: no such store: '{missing}' does not exist"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["global --url", "$MEMVAULT_URL"])
def test_the_store_can_be_named_as_for_every_command(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path}/named.db"
    args, env = (
        (["--url", url, "mcp"], {}) if where == "global --url" else (["mcp"], {"MEMVAULT_URL": url})
    )
    done = subprocess.run(
        [MEMVAULT, *args, "--read-only"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert (done.returncode, done.stderr.strip()) == (
        1,
        f"error: ConfigurationError: no such store: '{tmp_path}/named.db' does not exist",
    )
