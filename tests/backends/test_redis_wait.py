"""``wait_replicas``/``wait_timeout``: each write waits for replicas with WAIT, on a
private primary and replica pair; too few acknowledgements are OutcomeUnknownError."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memvault
from memvault import ConfigurationError, Message, OutcomeUnknownError
from memvault.checks.opener import Opener
from tests.support.redis import RedisServer


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = RedisServer(tmp_path / "primary")
    replica = RedisServer(tmp_path / "replica", "--replicaof", "127.0.0.1", str(primary.port))
    try:
        deadline = time.monotonic() + 30
        while replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not connect"
            time.sleep(0.05)
        yield primary, replica
    finally:
        replica.kill()
        primary.kill()


def waits(server: RedisServer) -> int:
    stats = server.client().info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


@pytest.mark.parametrize("face", ["sync", "async"])
def test_writes_wait_for_the_replica(pair: tuple[RedisServer, RedisServer], face: str) -> None:
    """Every write (not the reads) is followed by a WAIT; the replica has the write
    when the call returns; a script cache flushed on the primary is reloaded."""
    primary, replica = pair
    store = Opener(f"{primary.url}?wait_replicas=1&wait_timeout=10", face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append([Message.user("one")])  # loads the script (NOSCRIPT, then the text)
        primary.client().config_resetstat()
        s.append([Message.user("two")])
        s.snapshot("cp")
        s.pop()
        assert waits(primary) == 3
        s.history()
        s.info()
        s.snapshots()
        assert waits(primary) == 3
        primary.client().script_flush()
        s.append([Message.user("three")])
        assert [m.content for m in s.history()] == ["one", "three"]
    finally:
        store.close()
    with memvault.open(replica.url) as copy:
        assert [m.content for m in copy.session("s").history()] == ["one", "three"]
        assert [x.name for x in copy.session("s").snapshots()] == ["cp"]


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_missing_replica_is_an_unknown_outcome(
    pair: tuple[RedisServer, RedisServer], face: str
) -> None:
    """With the replica gone, a write is applied on the primary but not acknowledged:
    OutcomeUnknownError, after about wait_timeout; the retry stores the batch once;
    reads keep working."""
    primary, replica = pair
    replica.kill()
    store = Opener(f"{primary.url}?wait_replicas=1&wait_timeout=0.2", face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        batch = [Message.user("kept once")]
        started = time.monotonic()
        with pytest.raises(OutcomeUnknownError, match="only 0 of the 1 replicas"):
            s.append(batch)
        assert time.monotonic() - started >= 0.2
        with pytest.raises(OutcomeUnknownError):
            s.append(batch)  # the retry: a no-op on the primary, still not replicated
        assert [m.id for m in s.history()] == [batch[0].id]
        assert s.info().version == 1
    finally:
        store.close()


def test_more_replicas_than_there_are(pair: tuple[RedisServer, RedisServer]) -> None:
    primary, _ = pair
    with memvault.open(primary.url, wait_replicas=2, wait_timeout=0.1) as store:
        with pytest.raises(OutcomeUnknownError, match="only 1 of the 2 replicas"):
            store.session("s").append([Message.user("x")])


@pytest.mark.parametrize(
    "query",
    [
        "wait_replicas=-1",
        "wait_replicas=x",
        "wait_replicas=1&wait_timeout=0",
        "wait_replicas=1&wait_timeout=nan",
        "wait_replicas=1&cluster=true",
    ],
)
def test_bad_wait_options_are_refused(query: str) -> None:
    with pytest.raises(ConfigurationError, match="wait_"):
        memvault.open(f"redis://127.0.0.1:1/0?{query}")
