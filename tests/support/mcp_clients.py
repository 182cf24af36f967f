"""The MCP SDK's own client on memvault's MCP server, for synchronous tests.

:func:`stdio` starts ``memvault mcp ...`` as a subprocess, as a desktop client does,
and talks to it through ``stdio_client`` and ``ClientSession``; :func:`http_server`
starts ``memvault mcp --transport http`` and :func:`http` connects to it with
``streamable_http_client``; :func:`in_process` connects to a server object in this
process. The async session runs in an anyio blocking portal (a thread with its own
event loop), so a connection made once serves every test of a module; :class:`Client`
calls it from plain test functions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.client import Client as SdkClient
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

MEMVAULT = str(Path(sys.executable).parent / "memvault")
"""The ``memvault`` command of the environment running the tests."""


@dataclass
class Client:
    """A connected ClientSession, called from synchronous code."""

    portal: BlockingPortal
    session: ClientSession

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        return self.portal.call(self.session.call_tool, tool, arguments)

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The structured result of a call that must succeed (its text is the same JSON)."""
        result = self.call(tool, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        text = result.content[0].text  # type: ignore[union-attr]
        assert json.loads(text) == result.structured_content
        return result.structured_content

    def error(self, tool: str, **arguments: Any) -> str:
        """The text of a call that must fail as a tool error."""
        result = self.call(tool, arguments)
        assert result.is_error, result.structured_content
        assert len(result.content) == 1
        return result.content[0].text  # type: ignore[union-attr]

    def tools(self) -> dict[str, Tool]:
        return {t.name: t for t in self.portal.call(self.session.list_tools).tools}

    def read(self, uri: str) -> str:
        result = self.portal.call(self.session.read_resource, uri)
        (content,) = result.contents
        return content.text  # type: ignore[union-attr]


def tour(client: Client, s: str) -> list[dict[str, Any]]:
    """Every tool once (and the resource), checked; returns every result."""
    seen = [
        client.ok(
            "append_messages",
            session_id=s,
            messages=[
                {"id": "u1", "role": "user", "content": "My name is Wang \x00"},
                {"id": "a1", "role": "assistant", "content": "Got it, Wang"},
            ],
        ),
        client.ok("save_snapshot", session_id=s, name="named"),
        client.ok("append_messages", session_id=s, messages=[{"role": "user", "content": "oops"}]),
        client.ok("rollback", session_id=s, name="named"),
        client.ok("summarize", session_id=s, summary="The user is Wang", through="u1"),
        client.ok("read_history", session_id=s),
        client.ok("read_history", session_id=s, full=True, last=2),
        client.ok("search_messages", query="wang", session_id=s),
        client.ok("search_messages", query="wang"),
        client.ok("list_snapshots", session_id=s),
        client.ok("list_sessions", limit=10),
        client.ok("show_log", session_id=s),
    ]
    assert [m["content"] for m in seen[5]["messages"]] == ["The user is Wang", "Got it, Wang"]
    assert [m["content"] for m in seen[6]["messages"]] == ["The user is Wang", "Got it, Wang"]
    assert {h["message"]["id"] for h in seen[7]["hits"]} >= {"u1", "a1"}
    assert [x["name"] for x in seen[9]["snapshots"]] == ["named", "auto:pre-rollback@v2"]
    assert [i["session_id"] for i in seen[10]["sessions"]] == [s]
    assert [e["op"] for e in seen[11]["events"]] == [
        "append",
        "snapshot",
        "append",
        "rollback",
        "summarize",
    ]
    assert "Got it, Wang" in client.read(f"memvault://sessions/{s}/history")
    return seen


@asynccontextmanager
async def _session(transport: AbstractAsyncContextManager[Any]) -> AsyncIterator[ClientSession]:
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def _driven(transport: AbstractAsyncContextManager[Any]) -> Iterator[Client]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(transport)) as session,
    ):
        yield Client(portal, session)


@contextmanager
def stdio(*args: str, stderr: Path, env: dict[str, str] | None = None) -> Iterator[Client]:
    """``memvault mcp ARGS`` on stdio; its stderr (the server's log) goes to ``stderr``."""
    params = StdioServerParameters(command=MEMVAULT, args=["mcp", *args], env=env)
    with stderr.open("a", encoding="utf-8") as log, _driven(stdio_client(params, log)) as client:
        yield client


@contextmanager
def http_server(*args: str, stderr: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``memvault mcp --transport http --port 0 ARGS`` (a ``--port`` in ARGS wins): its
    endpoint URL (from the line it announces on stderr) and its process; stopped
    (SIGTERM) on leaving."""
    with stderr.open("ab") as log:
        proc = subprocess.Popen(
            [MEMVAULT, "mcp", "--transport", "http", "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        yield announced(proc, stderr), proc
    finally:
        proc.terminate()
        proc.wait(30)


def announced(proc: subprocess.Popen[bytes], stderr: Path) -> str:
    """The URL in the server's "memvault MCP server on http://..." line."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in stderr.read_text("utf-8", "replace").splitlines():
            if line.startswith("memvault MCP server on http://"):
                return line.split()[4]
        assert proc.poll() is None, stderr.read_text("utf-8", "replace")
        time.sleep(0.05)
    raise AssertionError(f"no address announced: {stderr.read_text('utf-8', 'replace')}")


@contextmanager
def http(url: str) -> Iterator[Client]:
    with _driven(streamable_http_client(url)) as client:
        yield client


@contextmanager
def in_process(server: Any) -> Iterator[Client]:
    """A client on a server object of this process (the SDK's in-memory transport)."""
    with start_blocking_portal() as portal:
        sdk = SdkClient(server, mode="legacy")
        with portal.wrap_async_context_manager(sdk):
            yield Client(portal, sdk.session)
