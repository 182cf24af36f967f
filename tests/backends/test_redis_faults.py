"""Driver errors become memvault errors that say whether anything was applied,
checked against real private redis-server processes (never the shared one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memvault.checks.opener import Opener
from memvault.errors import BackendError, BackendUnavailableError, OutcomeUnknownError
from memvault.messages import Message
from memvault.testing.workers import turn
from memvault.torture.proxy import CuttingProxy
from tests.support.redis import RedisServer

FACES = ["sync", "async"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    yield server
    server.kill()


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


@pytest.mark.parametrize("face", FACES)
def test_stopped_server_is_unavailable(server: RedisServer, face: str) -> None:
    """A server that is gone: BackendUnavailableError (nothing applied) for writes and
    reads alike, the driver's ConnectionError as __cause__."""
    store = Opener(server.url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append(turn("w", 0))
        server.kill()
        for call in (lambda: s.append(turn("w", 1)), s.history, store.sessions):
            with pytest.raises(BackendUnavailableError) as err:
                call()
            assert isinstance(err.value.__cause__, redis.ConnectionError)
    finally:
        store.close()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("loss", ["timeout", "lost-reply"])
def test_unknown_outcome_then_retry_stores_once(server: RedisServer, face: str, loss: str) -> None:
    """An append whose reply never comes raises OutcomeUnknownError, the driver's
    error as cause; retrying the same messages leaves them stored exactly once.
    "timeout": CLIENT PAUSE holds the append past socket_timeout (it never runs);
    "lost-reply": the append runs but a proxy swallows its reply (the retry finds
    the ids stored and writes nothing)."""
    proxy = CuttingProxy(("127.0.0.1", server.port), cut_rate=0, seed=0)
    store = Opener(f"redis://127.0.0.1:{proxy.port}/0", face, {"socket_timeout": 0.5})()  # type: ignore[arg-type]
    admin = server.client()
    try:
        s = store.session("s")
        s.append(turn("w", 0))
        if loss == "timeout":
            admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        else:
            proxy.reply_cut_rate = 1  # the reply is cut short: the append ran
        with pytest.raises(OutcomeUnknownError) as err:
            s.append(turn("w", 1))
        cause = redis.TimeoutError if loss == "timeout" else redis.ConnectionError
        assert isinstance(err.value.__cause__, cause)
        admin.ping()  # returns once a pause is over
        proxy.reply_cut_rate = 0
        if loss == "lost-reply":
            assert s.info().version == 2  # it did run
        assert s.append(turn("w", 1)) == 2
        assert ids(s.history()) == ids(turn("w", 0) + turn("w", 1))
        assert [e.op for e in s.log()] == ["append", "append"]
    finally:
        admin.close()
        store.close()
        proxy.close()


@pytest.mark.parametrize("face", FACES)
def test_out_of_memory_is_backend_error_and_writes_nothing(server: RedisServer, face: str) -> None:
    """Past maxmemory a write raises BackendError (the server's OOM reply as cause)
    and leaves nothing half-written; reads still work; writes resume once memory is
    available again."""
    admin = server.client()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", admin.info("memory")["used_memory"] + 2_000_000)
    store = Opener(server.url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        acked: list[str] = []
        with pytest.raises(BackendError) as err:
            for i in range(200):
                batch = [Message.user(f"{i}" * 20_000), Message.assistant("ok")]
                s.append(batch)
                acked += ids(batch)
        assert type(err.value) is BackendError
        assert isinstance(err.value.__cause__, redis.exceptions.OutOfMemoryError)
        assert acked and ids(s.history()) == acked
        assert s.info().version == len(acked) // 2
        admin.config_set("maxmemory", 0)
        s.append([Message.user("after")])
        assert s.history()[-1].content == "after"
    finally:
        admin.close()
        store.close()


@pytest.mark.parametrize("face", FACES)
def test_scripts_are_reloaded_after_script_flush(server: RedisServer, face: str) -> None:
    """A server that lost its script cache (restart, failover, SCRIPT FLUSH) gets the
    script again on NOSCRIPT; the caller sees nothing."""
    store = Opener(server.url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append(turn("w", 0))
        server.client().script_flush()
        s.append(turn("w", 1))
        server.client().script_flush()
        assert ids(s.history()) == ids(turn("w", 0) + turn("w", 1))
    finally:
        store.close()
