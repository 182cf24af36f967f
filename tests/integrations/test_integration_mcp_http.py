"""``memvault mcp --transport http``: streamable HTTP through the SDK's own client.

The server binds loopback unless told otherwise, refuses requests that name another
host or come from another origin (DNS rebinding), serves every tool to several
clients at once, and refuses a request it cannot parse with nothing written.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

import memvault
from memvault.testing import dump_state
from tests.support.mcp_clients import http, http_server, tour

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    folder = tmp_path_factory.mktemp("http")
    url = f"sqlite:///{folder}/store.db"
    with http_server("--url", url, stderr=folder / "log") as (endpoint, _):
        yield endpoint, url, folder / "log"


def listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _, state = line.split()[1:4]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


def test_it_binds_loopback_by_default(served: tuple[str, str, Path]) -> None:
    endpoint, url, log = served
    parts = urlsplit(endpoint)
    assert (parts.hostname, parts.path) == ("127.0.0.1", "/mcp")
    assert listening(parts.port or 0) == ["0100007F"]  # 127.0.0.1 alone
    assert f"over {url}" in log.read_text("utf-8")
    assert "warning" not in log.read_text("utf-8")


def test_every_tool_over_http_and_two_clients_at_once(served: tuple[str, str, Path]) -> None:
    endpoint, url, _ = served
    with http(endpoint) as first, http(endpoint) as second:
        tour(first, "over http")
        first.ok("append_messages", session_id="both", messages=[{"role": "user", "content": "1"}])
        second.ok("append_messages", session_id="both", messages=[{"role": "user", "content": "2"}])
        read = second.ok("read_history", session_id="both")
    assert [m["content"] for m in read["messages"]] == ["1", "2"]
    with memvault.open(url) as store:
        assert [m.content for m in store.session("both").history()] == ["1", "2"]


def raw_session(client: httpx.Client, endpoint: str) -> dict[str, str]:
    """Initialize by hand (no SDK); the headers of the MCP session it opened."""
    answer = client.post(endpoint, headers=HEADERS, json=INITIALIZE)
    assert answer.status_code == 200, answer.text
    headers = {
        **HEADERS,
        "mcp-session-id": answer.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    done = client.post(
        endpoint, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert done.status_code == 202, done.text
    return headers


def call(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )


APPEND = call(
    "append_messages", {"session_id": "s", "messages": [{"role": "user", "content": "x"}]}
)


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("Host", "evil.example", 421),
        ("Host", "evil.example:80", 421),
        ("Host", "127.0.0.1.evil.example:1", 421),
        ("Origin", "http://evil.example", 403),
        ("Origin", "http://127.0.0.1.evil.example:8738", 403),
    ],
)
def test_a_request_naming_another_host_or_origin_is_refused(
    served: tuple[str, str, Path], header: str, value: str, status: int
) -> None:
    endpoint, url, _ = served
    with memvault.open(url) as store:
        before = dump_state(store)
    with httpx.Client(timeout=30) as client:
        headers = raw_session(client, endpoint)
        refused = client.post(endpoint, headers={**headers, header: value}, content=APPEND)
        assert refused.status_code == status, refused.text
        fresh = client.post(endpoint, headers={**HEADERS, header: value}, json=INITIALIZE)
        assert fresh.status_code == status, fresh.text
    with memvault.open(url) as store:
        assert dump_state(store) == before


def test_a_loopback_name_is_served(served: tuple[str, str, Path]) -> None:
    endpoint, _, _ = served
    port = urlsplit(endpoint).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        with httpx.Client(timeout=30) as client:
            answer = client.post(endpoint, headers={**HEADERS, "Host": host}, json=INITIALIZE)
            assert answer.status_code == 200, (host, answer.text)


def test_text_json_cannot_carry_is_refused_with_nothing_written(
    served: tuple[str, str, Path],
) -> None:
    """A lone surrogate (which the SDK's client cannot even send) in a raw request."""
    endpoint, url, _ = served
    with memvault.open(url) as store:
        before = dump_state(store)
    body = APPEND.replace('"content": "x"', '"content": "x\\ud800y"')
    with httpx.Client(timeout=30) as client:
        headers = raw_session(client, endpoint)
        answer = client.post(endpoint, headers=headers, content=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700  # parse error
    with memvault.open(url) as store:
        assert dump_state(store) == before


def test_binding_another_address_warns_that_the_store_is_exposed(tmp_path: Path) -> None:
    log = tmp_path / "log"
    url = f"sqlite:///{tmp_path}/store.db"
    with http_server("--url", url, "--host", "0.0.0.0", stderr=log) as (endpoint, _):
        port = urlsplit(endpoint).port
        assert listening(port or 0) == ["00000000"]
        with http(f"http://127.0.0.1:{port}/mcp") as client:
            assert client.ok("list_sessions")["sessions"] == []
    assert "warning: binding 0.0.0.0: anyone who can reach this address can use the store" in (
        log.read_text("utf-8")
    )


def test_the_port_is_the_one_asked_for(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with http_server(
        "--url", f"sqlite:///{tmp_path}/store.db", "--port", str(port), stderr=tmp_path / "log"
    ) as (endpoint, _):
        assert endpoint == f"http://127.0.0.1:{port}/mcp"


def test_a_history_larger_than_the_clients_event_limit_is_read_whole(
    served: tuple[str, str, Path],
) -> None:
    """The SDK's client refuses a server-sent event over 1 MiB; answers are JSON."""
    endpoint, _, _ = served
    big = "\U0001f600\x00é" * 300_000  # 2.1 MiB of UTF-8
    with http(endpoint) as client:
        client.ok("append_messages", session_id="big", messages=[{"role": "user", "content": big}])
        read = client.ok("read_history", session_id="big")
    assert read["messages"][0]["content"] == big
