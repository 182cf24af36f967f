"""``memvault mcp`` on SQLite, Redis and PostgreSQL, two server processes at a time.

Two servers on one store append to one session at once, several calls in flight
each: every acknowledged message is stored exactly once, each call's messages
adjacent and in order, and a retry through the other server stores nothing. Every
tool runs on every backend. A password in the store URL never shows in a tool's
output or in the server's log, and an unreachable store is a tool error saying
that nothing was applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.types import CallToolResult

import memvault
from tests.support.backends import BACKENDS
from tests.support.mcp_clients import Client, stdio, tour
from tests.support.postgres import new_schema, url_for
from tests.support.redis import free_port

SESSION = "shared \x00 用户"
BATCHES = 16
PER_BATCH = 3
IN_FLIGHT = 4


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](request, tmp_path)


async def in_flight(
    session: ClientSession, tool: str, calls: list[dict[str, Any]], width: int
) -> list[CallToolResult]:
    """The calls, ``width`` at a time, their results in order."""
    results: list[Any] = [None] * len(calls)
    limit = anyio.Semaphore(width)

    async def one(i: int) -> None:
        async with limit:
            results[i] = await session.call_tool(tool, calls[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return results


def batches(writer: str) -> list[list[dict[str, Any]]]:
    return [
        [
            {"id": f"{writer}-{b}-{i}", "role": "user", "content": f"{writer} {b} {i}"}
            for i in range(PER_BATCH)
        ]
        for b in range(BATCHES)
    ]


def appending(client: Client, writer: str) -> Callable[[], list[CallToolResult]]:
    calls = [{"session_id": SESSION, "messages": b} for b in batches(writer)]
    return lambda: client.portal.call(
        in_flight, client.session, "append_messages", calls, IN_FLIGHT
    )


def test_two_server_processes_appending_to_one_session_lose_nothing(
    url: str, tmp_path: Path
) -> None:
    with (
        stdio("--url", url, stderr=tmp_path / "a.log") as a,
        stdio("--url", url, stderr=tmp_path / "b.log") as b,
        ThreadPoolExecutor(2) as pool,
    ):
        runs = [pool.submit(appending(a, "A")), pool.submit(appending(b, "B"))]
        results = {w: run.result() for w, run in zip("AB", runs, strict=True)}
        failed = [r.content for rs in results.values() for r in rs if r.is_error]
        assert failed == []
        versions = [r.structured_content["version"] for rs in results.values() for r in rs]
        assert sorted(versions) == list(range(1, 2 * BATCHES + 1))  # one each, none shared

        retry = b.ok("append_messages", session_id=SESSION, messages=batches("A")[0])
        assert retry["version"] == 2 * BATCHES  # stored already: a no-op

    with memvault.open(url) as store:
        stored = [m.id for m in store.session(SESSION).history()]
    acknowledged = [m["id"] for w in "AB" for batch in batches(w) for m in batch]
    assert Counter(stored) == Counter(acknowledged)  # each once, nothing else
    # Each call's messages are adjacent, in order, where the version it was given says.
    for w in "AB":
        for batch, result in zip(batches(w), results[w], strict=True):
            at = (result.structured_content["version"] - 1) * PER_BATCH
            assert stored[at : at + PER_BATCH] == [m["id"] for m in batch]


def test_every_tool_on_every_backend(url: str, tmp_path: Path) -> None:
    with stdio("--url", url, stderr=tmp_path / "log") as client:
        tour(client, "tour")


PASSWORD = "hunter2-Pa55w0rd"


def test_a_password_never_shows_in_output_or_logs(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # The test server trusts local connections: the password is carried, never checked.
    url = url_for(
        new_schema(request), server=f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/test"
    )
    log = tmp_path / "log"
    texts: list[str] = []
    with stdio("--url", url, stderr=log) as client:
        for result in tour(client, "secret"):
            texts.append(repr(result))
        for tool, arguments in [
            ("append_messages", {"session_id": "", "messages": []}),
            ("rollback", {"session_id": "secret", "name": "missing"}),
            ("read_history", {"session_id": "secret", "last": "x"}),
        ]:
            texts.append(client.error(tool, **arguments))
        texts.append(repr(client.portal.call(client.session.list_resources)))
        init = client.session.initialize_result
        texts.append(repr(init))
    written = log.read_text("utf-8")
    assert "postgresql://postgres:***@127.0.0.1:5432/test" in written  # the URL is shown
    assert all(PASSWORD not in text for text in [*texts, written])


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_an_unreachable_store_is_a_tool_error_saying_nothing_was_applied(
    scheme: str, tmp_path: Path
) -> None:
    port = free_port()
    path = "0" if scheme == "redis" else "test"
    url = f"{scheme}://user:{PASSWORD}@127.0.0.1:{port}/{path}"
    log = tmp_path / "log"
    with stdio("--url", url, stderr=log) as client:
        write = client.error(
            "append_messages", session_id="s", messages=[{"role": "user", "content": "x"}]
        )
        read = client.error("read_history", session_id="s")
        with pytest.raises(Exception, match="BackendUnavailableError") as listing:
            client.portal.call(client.session.list_resources)
    assert "BackendUnavailableError" in write
    assert "the same call can be made again." in write.lower()
    assert "nothing was applied" in write.lower()
    assert "BackendUnavailableError" in read and "The same call can be made again" in read
    for text in (write, read, str(listing.value), log.read_text("utf-8")):
        assert PASSWORD not in text
        assert "Traceback" not in text
