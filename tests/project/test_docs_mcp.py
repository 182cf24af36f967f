"""The MCP server's docs match the server: the ``mcpServers`` blocks of README.md and
docs/integrations.md start a server that works, and the tools they name and the
annotations they give are the server's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp_clients import Client, stdio

ROOT = Path(__file__).resolve().parents[2]
DOCS = {name: (ROOT / name).read_text("utf-8") for name in ("README.md", "docs/integrations.md")}
HOME = "/home/me/"
"""The folder the blocks' store URLs name; the test puts a temporary one in its place."""


def config_blocks() -> list[tuple[str, dict[str, dict[str, object]]]]:
    return [
        (name, json.loads(block)["mcpServers"])
        for name, text in DOCS.items()
        for block in re.findall(r"^```json\n(.*?)^```$", text, re.M | re.S)
        if "mcpServers" in block
    ]


def test_each_doc_has_the_client_configuration() -> None:
    assert sorted(name for name, _ in config_blocks()) == sorted(DOCS)


@pytest.mark.parametrize(("doc", "servers"), config_blocks())
def test_the_configuration_starts_a_server_that_works(
    doc: str, servers: dict[str, dict[str, object]], tmp_path: Path
) -> None:
    (entry,) = servers.values()
    assert entry["command"] == "memvault"
    args = [str(a).replace(HOME, f"{tmp_path}/") for a in entry["args"]]  # type: ignore[attr-defined]
    assert any(str(tmp_path) in a for a in args), "the store URL names the example folder"
    assert args[0] == "mcp"
    with stdio(*args[1:], stderr=tmp_path / "log") as client:  # MEMVAULT mcp ...
        assert len(client.tools()) == 9
        client.ok("append_messages", session_id="s", messages=[{"role": "user", "content": "x"}])
        assert client.ok("read_history", session_id="s")["length"] == 1
    assert list(tmp_path.glob("*.db"))


def section(doc: str) -> str:
    """The doc's "## MCP server" section."""
    return DOCS[doc].split("\n## MCP server\n", 1)[1].split("\n## ", 1)[0]


def tool_table() -> dict[str, str]:
    """docs/integrations.md's tool table: tool name -> its annotations column."""
    rows = re.findall(r"^\| `(\w+)` \| .*? \| (.*?) \|$", section("docs/integrations.md"), re.M)
    return dict(rows)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    folder = tmp_path_factory.mktemp("docs")
    with stdio("--url", f"sqlite:///{folder}/x.db", stderr=folder / "log") as client:
        yield client


def test_the_tool_table_lists_every_tool_with_its_annotations(client: Client) -> None:
    tools = client.tools()
    table = tool_table()
    assert sorted(table) == sorted(tools)
    for name, column in table.items():
        hints = tools[name].annotations
        assert hints is not None
        assert column.startswith("read-only") == hints.read_only_hint, name
        if not hints.read_only_hint:
            assert ("destructive" in column) == hints.destructive_hint, name
            assert ("not idempotent" not in column) == hints.idempotent_hint, name


def test_the_readme_names_every_tool(client: Client) -> None:
    named = re.findall(r"`([a-z]+_[a-z_]+|summarize|rollback)`", section("README.md"))
    assert sorted(set(named)) == sorted(client.tools())
