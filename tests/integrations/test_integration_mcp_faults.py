"""A backend failure through the MCP server: the tool error says whether the write may
have happened, and how to retry it safely; the retry it describes stores nothing twice.

The server runs in this process over a memory store whose backend fails on purpose
(memvault's fault injector): ``before`` a call is sent (BackendUnavailableError:
nothing applied) or ``after`` it committed (OutcomeUnknownError: the reply was lost).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import pytest

import memvault
from memvault.checks.faults import FaultInjector, inject_faults
from memvault.integrations.mcp import build_server
from tests.support.mcp_clients import Client, in_process


@pytest.fixture
def store() -> memvault.AsyncStore:
    return memvault.open_async("memory://")


@pytest.fixture
def faults(store: memvault.AsyncStore) -> FaultInjector:
    return inject_faults(store)


@pytest.fixture
def client(store: memvault.AsyncStore) -> Iterator[Client]:
    with in_process(build_server(store)) as client:
        yield client


def stored(client: Client, session_id: str = "s") -> list[str]:
    return [m["id"] for m in client.ok("read_history", session_id=session_id)["messages"]]


def test_an_append_whose_reply_was_lost_says_so_and_the_retry_it_names_stores_once(
    client: Client, faults: FaultInjector
) -> None:
    faults.fail("append", when="after")
    batch = [{"id": "m1", "role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    text = client.error("append_messages", session_id="s", messages=batch)
    assert "OutcomeUnknownError" in text
    assert "The write may or may not have been applied." in text
    assert "Retrying with the same message ids is safe" in text
    ids = ast.literal_eval(re.search(r"The ids: (\[.*\])\.$", text).group(1))  # type: ignore[union-attr]
    assert ids[0] == "m1" and len(ids) == 2  # the one memvault assigned too
    assert stored(client) == ids  # it had been applied
    retried = [{**m, "id": i} for m, i in zip(batch, ids, strict=True)]
    assert client.ok("append_messages", session_id="s", messages=retried)["version"] == 1
    assert stored(client) == ids


def test_an_append_that_was_not_sent_says_nothing_was_applied(
    client: Client, faults: FaultInjector
) -> None:
    faults.fail("append", when="before")
    text = client.error(
        "append_messages", session_id="s", messages=[{"role": "user", "content": "hi"}]
    )
    assert "BackendUnavailableError" in text
    assert text.endswith("Nothing was applied: the same call can be made again.")
    assert stored(client) == []


def test_a_summary_whose_reply_was_lost_names_its_id_and_the_retry_is_a_no_op(
    client: Client, faults: FaultInjector
) -> None:
    client.ok(
        "append_messages", session_id="s", messages=[{"id": "m1", "role": "user", "content": "a"}]
    )
    faults.fail("summarize", when="after")
    text = client.error("summarize", session_id="s", summary="sum", through="m1")
    assert "OutcomeUnknownError" in text and "may or may not have been applied" in text
    summary_id = re.search(r"Retrying with summary_id '([^']+)' is safe", text).group(1)  # type: ignore[union-attr]
    again = client.ok(
        "summarize", session_id="s", summary="sum", through="m1", summary_id=summary_id
    )
    assert again["version"] == 2  # the first call's summary, not a second one
    assert [e["op"] for e in client.ok("show_log", session_id="s")["events"]] == [
        "append",
        "summarize",
    ]


def test_a_snapshot_or_rollback_whose_reply_was_lost_says_how_to_check(
    client: Client, faults: FaultInjector
) -> None:
    client.ok("append_messages", session_id="s", messages=[{"role": "user", "content": "a"}])
    faults.fail("snapshot", when="after")
    text = client.error("save_snapshot", session_id="s", name="x")
    assert "may or may not have been applied" in text and "SnapshotExistsError" in text
    assert "SnapshotExistsError" in client.error("save_snapshot", session_id="s", name="x")
    faults.fail("rollback", when="after")
    text = client.error("rollback", session_id="s", name="x")
    assert "may or may not have been applied" in text and "show_log" in text
    assert client.ok("show_log", session_id="s")["events"][-1]["op"] == "rollback"


@pytest.mark.parametrize(
    ("operation", "tool", "arguments"),
    [
        ("history", "read_history", {"session_id": "s"}),
        ("log", "show_log", {"session_id": "s"}),
        ("snapshots", "list_snapshots", {"session_id": "s"}),
    ],
)
def test_a_failed_read_says_it_can_be_made_again(
    client: Client, faults: FaultInjector, operation: str, tool: str, arguments: dict[str, str]
) -> None:
    faults.fail(operation, when="before")
    text = client.error(tool, **arguments)
    assert "BackendUnavailableError" in text and text.endswith("The same call can be made again.")
    assert client.ok(tool, **arguments)
