"""Sliding TTL: every write extends it, reads never do, expiry is all or nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

import memvault.store
from memvault.errors import ConflictError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, texts, users

TTL = 1.5


class FrozenClock:
    """Stands for the ``time`` module memvault.store reads the clock from: ``time()``
    answers ``now`` until a test moves it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


class TtlContract(ContractBase):
    @contextlib.contextmanager
    def session_with_ttl(self, opener: Any) -> Iterator[tuple[Any, Any]]:
        """A store opened with ``ttl=TTL`` and session "s" holding 2 messages and
        snapshot "cp" (skips without the ``ttl`` capability)."""
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            s = store.session("s")
            s.append(users(2))
            s.snapshot("cp")
            yield store, s
        finally:
            store.close()

    def test_session_expires_whole_and_restarts_afresh(self, opener: Any) -> None:
        """Reads do not extend the TTL; after it, history, info, snapshots and
        sessions() are empty; a write starts the session afresh (version 1).
        Failing: reads extend the TTL, part of the session outlives the rest, or an
        expired session is not started afresh (look at how the backend sets and checks
        expires_at).
        """
        with self.session_with_ttl(opener) as (store, s):
            expires = s.info().expires_at
            assert expires is not None and 0 < expires.timestamp() - time.time() <= TTL
            time.sleep(TTL * 0.6)
            assert len(s.history()) == 2  # a read: must not extend
            time.sleep(TTL * 0.6)
            assert s.history() == [] and s.info() is None and s.snapshots() == []
            assert store.sessions() == []
            assert s.append(users(1, "new")) == 1
            assert texts(s.history()) == ["new0"] and s.snapshots() == []

    def test_expired_session_is_gone_for_writes_too(self, opener: Any) -> None:
        """A write to an expired session starts it afresh, so its expect_version is 0,
        not the expired row's version; delete() of an expired session answers False
        (it did not exist for any read) and leaves nothing behind. Failing: the engine
        compares expect_version with the expired row's version (a mutant that survived
        the suite), or delete() answers True on one backend and False on another
        (memory, SQLite and PostgreSQL said True, Redis False).
        """
        with self.session_with_ttl(opener) as (store, s):
            gone = store.session("gone")
            gone.append(users(1))
            assert s.info().version == 1
            time.sleep(TTL * 1.2)
            assert gone.delete() is False and gone.delete() is False
            assert gone.append(users(1, "again")) == 1 and len(gone.log()) == 1
            with pytest.raises(ConflictError, match="at version 0"):
                s.append(users(1, "stale"), expect_version=1)
            assert s.append(users(1, "new"), expect_version=0) == 1
            assert texts(s.history()) == ["new0"]

    def test_expiry_instant_is_exact(self, opener: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """By the client's clock (frozen here), a session is there until its
        expires_at and gone from that instant on, for reads and writes alike: a
        millisecond before, every read sees it; at expires_at, history (both views,
        with and without ``last``), info, snapshots, log, sessions() and search are
        empty, pop finds nothing, a write starts afresh at version 0 (before compact
        or after it) and compact removes the expired session once. Failing: a backend
        compared ``expires_at < now`` (mutants of Redis's common.lua and of
        PostgreSQL's search, compact, full_history and append survived that way), so a
        session outlived its expiry.
        """
        self.require("ttl")
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        store = opener(ttl=60)
        try:
            s, other = store.session("s"), store.session("other")
            s.append(users(2))
            s.snapshot("cp")
            other.append(users(1))
            expires = clock.now + 60
            clock.now = expires - 0.001
            assert (s.info().length, len(s.history()), len(s.snapshots()), len(s.log())) == (
                2,
                2,
                1,
                2,
            )
            assert (len(s.history(last=1)), len(s.history(full=True))) == (1, 2)
            assert store.sessions() == ["other", "s"]
            assert len(store.search("m0")) == 2
            clock.now = expires
            assert s.info() is None and s.history() == [] and s.snapshots() == []
            assert s.history(last=1) == [] and s.history(full=True) == []
            assert s.log() == [] and store.sessions() == [] and store.search("m0") == []
            assert other.pop() is None and other.info() is None
            assert other.append(users(1, "again"), expect_version=0) == 1  # afresh
            assert texts(other.history()) == ["again0"] and other.info().version == 1
            assert store.compact().sessions == 1 and store.compact().sessions == 0
            assert s.append(users(1, "new"), expect_version=0) == 1
            assert texts(s.history()) == ["new0"] and s.info().version == 1
            assert s.snapshots() == [] and [e.op for e in s.log()] == ["append"]
        finally:
            store.close()

    def test_a_write_restarts_an_expired_session_from_nothing(
        self, opener: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The first write to an expired session starts it from the empty history,
        whichever write it is: a snapshot taken first holds no message (it is listed,
        and rolling back to it empties the session); an append restarts it so that
        popping that message leaves nothing, at every version the log names.
        Failing: PostgreSQL's restart of an expired row left its head at node 1, so
        the snapshot pointed at a node that was not stored and the popped-to-empty
        version read a message back (a mutant survived the suite).
        """
        self.require("ttl")
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        store = opener(ttl=60)
        try:
            s, other = store.session("s"), store.session("other")
            s.append(users(2))
            other.append(users(2))
            clock.now += 60
            s.snapshot("fresh")
            assert [(x.name, x.length) for x in s.snapshots()] == [("fresh", 0)]
            s.append(users(1, "new"))
            s.rollback("fresh")
            assert s.history() == [] and s.info().length == 0
            other.append(users(1, "again"))
            assert other.pop().content == "again0"
            assert other.history() == [] and other.info().version == 2
            assert [other.history(at_version=v) for v in (0, 2)] == [[], []]
        finally:
            store.close()

    def test_compact_purges_an_expired_session_beside_live_ones(
        self, opener: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """compact removes an expired session, and only it: a live one beside it
        keeps its messages. Failing: PostgreSQL's compact_step, purging an expired
        session, deleted the rows of the others (a mutant survived the suite).
        """
        self.require("ttl")
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        store = opener(ttl=60)
        try:
            store.session("brief").append(users(2))
            clock.now += 30
            store.session("lasting").append(users(3))
            clock.now += 31
            stats = store.compact()
            assert (stats.sessions, stats.nodes) == (1, 2)
            assert store.sessions() == ["lasting"]
            assert texts(store.session("lasting").history()) == ["m0", "m1", "m2"]
        finally:
            store.close()

    def test_a_write_without_ttl_makes_the_session_permanent(
        self, opener: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each write sets the expiry from its own store's ttl: a write through a store
        opened without one leaves the session with no expiry, still there long after
        the old expiry; a later write with a ttl sets one again. Failing: the old expiry
        survived the write (Redis kept the expires field while it made the keys
        persistent).
        """
        self.require("ttl")
        self.require("persistent")  # two handles on one store
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        with_ttl, without = opener(ttl=60), opener()
        try:
            with_ttl.session("s").append(users(1))
            assert with_ttl.session("s").info().expires_at is not None
            without.session("s").append(users(1, "n"))
            clock.now += 120
            info = without.session("s").info()
            assert info is not None and info.expires_at is None and info.length == 2
            with_ttl.session("s").pop()
            assert with_ttl.session("s").info().expires_at is not None
        finally:
            with_ttl.close()
            without.close()

    def test_every_write_slides_the_ttl(self, opener: Any) -> None:
        """A write before expiry extends it by the full TTL.
        Failing: some write (pop, snapshot, trim) does not set expires_at = now + ttl.
        """
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            s = store.session("s")
            s.append(users(3))
            for write in (s.pop, lambda: s.snapshot("x"), lambda: s.trim(keep_last=1)):
                time.sleep(TTL * 0.6)
                write()
            time.sleep(TTL * 0.6)
            assert texts(s.history()) == ["m1"]
        finally:
            store.close()

    def test_snapshots_and_log_slide_with_the_session(self, opener: Any) -> None:
        """Every key of a session slides together: a snapshot taken at the start is
        still listed, and rollback to it still works, long after its own first TTL,
        while writes kept the session alive. Failing: the TTL is refreshed on only
        some of the session's keys (e.g. the messages but not the snapshots or log)."""
        with self.session_with_ttl(opener) as (_, s):
            for i in range(3):
                time.sleep(TTL * 0.6)
                s.append(users(1, f"w{i}"))
            assert [x.name for x in s.snapshots()] == ["cp"]
            assert [e.op for e in s.log()] == ["append", "snapshot", "append", "append", "append"]
            s.rollback("cp")
            assert texts(s.history()) == ["m0", "m1"]

    def test_no_ttl_means_no_expiry(self, store: Any) -> None:
        """Without ttl= a session has no expiry.
        Failing: the backend sets an expiry nobody asked for.
        """
        s = store.session("s")
        s.append(users(1))
        assert s.info().expires_at is None

    def test_search_after_expiry_finds_only_the_restarted_session(self, opener: Any) -> None:
        """An expired session's messages, searched before it expired, are not found
        after it restarts (not even with include_hidden, where the backend has an
        index); the new ones are, at their positions. Failing: index rows outliving
        the expired nodes (the restarted session reuses their node ids)."""
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            s = store.session("s")
            s.append([Message.user("melon old"), Message.user("melon older")])
            assert len(s.search("melon")) == 2
            time.sleep(TTL * 1.2)
            s.append([Message.user("fresh")])
            hidden = hasattr(store.backend, "search")
            assert s.search("melon", include_hidden=hidden) == []
            assert [(h.position, h.message.content) for h in s.search("fresh")] == [(1, "fresh")]
        finally:
            store.close()
