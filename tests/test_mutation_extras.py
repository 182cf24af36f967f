"""Exact clock-driven behaviour of the engine-based backends (memory, SQLite).

The client clock is replaced, so TTL expiry, timestamps and sliding are checked to
the second without sleeping. These tests were added to kill mutants that the
contract's sleeping TTL tests (too slow for a mutation run) would also catch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
import memvault.store
from memvault import Message
from memvault.model import utc


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/c.db"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(memvault.store, "time", clock)
    return clock


@pytest.fixture
def store(url: str, clock: Clock) -> Iterator[Any]:
    with memvault.open(url, ttl=10, writer="w") as store:
        yield store


def test_expiry_is_exact_and_total(store: Any, clock: Clock) -> None:
    t0 = clock.now
    s = store.session("s")
    s.append([Message.user("a", id="a")])
    s.snapshot("cp")
    info = s.info()
    assert (info.created_at, info.updated_at, info.expires_at) == (utc(t0), utc(t0), utc(t0 + 10))
    assert s.snapshots()[0].created_at == utc(t0) and s.log()[0].at == utc(t0)
    clock.now = t0 + 9.5
    assert s.history(last=1)[0].id == "a" and store.sessions() == ["s"]
    clock.now = t0 + 10  # expires_at is exclusive
    assert s.info() is None and s.history() == [] and s.snapshots() == [] and s.log() == []
    assert store.sessions() == []
    assert s.pop() is None and s.trim(keep_last=0) == 0
    clock.now = t0 + 11
    assert s.append([Message.user("a", id="a")]) == 1  # afresh: the old id is gone
    info = s.info()
    assert (info.version, info.length, info.created_at) == (1, 1, utc(t0 + 11))
    assert s.snapshots() == [] and [e.op for e in s.log()] == ["append"]


@pytest.mark.parametrize("write", ["append", "pop", "trim", "clear", "snapshot", "rollback"])
def test_every_write_slides_expiry_to_now_plus_ttl(store: Any, clock: Clock, write: str) -> None:
    t0 = clock.now
    s = store.session("s")
    s.append([Message.user(str(i)) for i in range(3)])
    s.snapshot("base")
    clock.now = t0 + 7
    {"append": lambda: s.append([Message.user("x")]), "pop": s.pop,
     "trim": lambda: s.trim(keep_last=1), "clear": s.clear,
     "snapshot": lambda: s.snapshot("later"), "rollback": lambda: s.rollback("base")}[write]()
    info = s.info()
    assert info.expires_at == utc(t0 + 17) and info.updated_at == utc(t0 + 7)
    assert info.created_at == utc(t0)
    clock.now = t0 + 16
    assert len(s.snapshots()) >= 1 and s.log()[-1].at == utc(t0 + 7)


def test_fork_sets_the_new_sessions_expiry_only(store: Any, clock: Clock) -> None:
    t0 = clock.now
    s = store.session("s")
    s.append([Message.user("a")])
    clock.now = t0 + 5
    f = s.fork("f")
    assert f.info().expires_at == utc(t0 + 15) and f.info().created_at == utc(t0 + 5)
    assert s.info().expires_at == utc(t0 + 10)
    clock.now = t0 + 12
    assert store.sessions() == ["f"]
    assert s.fork("g").history() == []  # an expired source forks as empty


def test_compact_purges_expired_sessions(store: Any, clock: Clock) -> None:
    t0 = clock.now
    store.session("old").append([Message.user("a"), Message.user("b")])
    clock.now = t0 + 8
    store.session("new").append([Message.user("c")])
    clock.now = t0 + 12
    stats = store.compact()
    assert (stats.sessions, stats.nodes, stats.events) == (1, 2, 0)
    assert store.sessions() == ["new"]
    clock.now = t0 + 30
    assert store.compact().sessions == 1 and store.compact().sessions == 0


def test_writes_to_a_session_do_not_slide_another(store: Any, clock: Clock) -> None:
    t0 = clock.now
    store.session("a").append([Message.user("a")])
    clock.now = t0 + 6
    store.session("b").append([Message.user("b")])
    clock.now = t0 + 11
    assert store.sessions() == ["b"]


def test_threads_appending_to_one_file_all_succeed(tmp_path: Path) -> None:
    """Six threads (a SQLite connection each) appending at once: every append succeeds
    and lands once, in each writer's order. A smaller, faster sibling of the contract's
    thread test, kept here for mutation runs."""
    import threading

    with memvault.open(f"sqlite:///{tmp_path}/t.db") as store:
        s = store.session("s")
        errors: list[BaseException] = []

        def run(w: int) -> None:
            try:
                for i in range(15):
                    s.append([Message.user(f"{w}.{i}"), Message.assistant(f"{w}.{i}")])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        history = [m.content for m in s.history()]
        assert len(history) == 180 and s.info().version == 90
        for w in range(6):
            mine = [c for c in history[::2] if str(c).startswith(f"{w}.")]
            assert mine == [f"{w}.{i}" for i in range(15)]
