"""Exact clock-driven behaviour of the engine-based backends (memory, SQLite).

The client clock is replaced, so TTL expiry, timestamps and sliding are checked to
the second without sleeping. These tests were added to kill mutants that the
contract's sleeping TTL tests (too slow for a mutation run) would also catch.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
import memvault.store
from memvault import Message
from memvault.backends.sqlite.schema import SCHEMA_VERSION
from memvault.model import utc


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


def in_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """Run ``work(0..count-1)`` in threads at once; the errors they raised."""
    errors: list[BaseException] = []

    def run(w: int) -> None:
        try:
            work(w)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


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


def test_a_page_lists_each_session_as_info_reads_it(store: Any, clock: Clock) -> None:
    """Every field of a listed session, its expiry included, in every order."""
    t0 = clock.now
    store.session("s").append([Message.user("a"), Message.user("b")])
    clock.now = t0 + 3
    store.session("t").append([Message.user("c")])
    infos = [store.session(i).info() for i in ("s", "t")]
    assert infos[0].expires_at == utc(t0 + 10) and infos[1].expires_at == utc(t0 + 13)
    for order in ("id", "version", "length", "updated", "expires"):
        assert (
            sorted(store.sessions_page(10, order=order).sessions, key=lambda i: i.session_id)
            == infos
        ), order


@pytest.mark.parametrize("write", ["append", "pop", "trim", "clear", "snapshot", "rollback"])
def test_every_write_slides_expiry_to_now_plus_ttl(store: Any, clock: Clock, write: str) -> None:
    t0 = clock.now
    s = store.session("s")
    s.append([Message.user(str(i)) for i in range(3)])
    s.snapshot("base")
    clock.now = t0 + 7
    {
        "append": lambda: s.append([Message.user("x")]),
        "pop": s.pop,
        "trim": lambda: s.trim(keep_last=1),
        "clear": s.clear,
        "snapshot": lambda: s.snapshot("later"),
        "rollback": lambda: s.rollback("base"),
    }[write]()
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


def test_parallel_appends_to_one_file_all_succeed(tmp_path: Path) -> None:
    """Six threads (a SQLite connection each) appending at once: every append succeeds
    and lands once, in each writer's order. A smaller, faster sibling of the contract's
    thread test, kept here for mutation runs."""
    with memvault.open(f"sqlite:///{tmp_path}/t.db") as store:
        s = store.session("s")

        def work(w: int) -> None:
            for i in range(15):
                s.append([Message.user(f"{w}.{i}"), Message.assistant(f"{w}.{i}")])

        assert in_threads(work, 6) == []
        history = [m.content for m in s.history()]
        assert len(history) == 180 and s.info().version == 90
        for w in range(6):
            mine = [c for c in history[::2] if str(c).startswith(f"{w}.")]
            assert mine == [f"{w}.{i}" for i in range(15)]


def test_event_log_records_exact_pointers_and_details(store: Any, clock: Clock) -> None:
    """Every operation's event: version, op, writer, time, head/base before and after,
    detail. The log is what answers "who removed my turns": it must be exact."""
    t = clock.now
    s = store.session("s")
    s.append([Message.user(x, id=x) for x in "abc"])
    s.snapshot("cp")
    s.pop()
    s.trim(keep_last=1)
    s.append([Message.user("d", id="d")])
    s.trim(keep_last=1)
    s.clear()
    s.rollback("cp")
    s.fork("f", at="cp")
    s.fork("g")
    got = [
        (
            e.version,
            e.op,
            e.writer,
            e.at,
            e.head_before,
            e.base_before,
            e.head_after,
            e.base_after,
            e.detail,
        )
        for e in s.log()
    ]
    at = utc(t)
    assert got == [
        (1, "append", "w", at, 0, 0, 3, 0, {"messages": 3}),
        (1, "snapshot", "w", at, 3, 0, 3, 0, {"name": "cp"}),
        (2, "pop", "w", at, 3, 0, 2, 0, {"message_id": "c"}),
        (3, "trim", "w", at, 2, 0, 2, 1, {"hidden": 1}),
        (4, "append", "w", at, 2, 1, 4, 1, {"messages": 1}),
        (5, "trim", "w", at, 4, 1, 4, 2, {"hidden": 1}),
        (6, "clear", "w", at, 4, 2, 4, 3, {"hidden": 1}),
        (7, "rollback", "w", at, 4, 3, 3, 0, {"to": "cp", "saved": "auto:pre-rollback@v6"}),
    ]
    forked = [
        (e.version, e.op, e.head_before, e.base_before, e.head_after, e.base_after, e.detail)
        for e in store.session("f").log()
    ]
    assert forked == [(1, "fork", 0, 0, 3, 0, {"from": "s", "at": "cp"})]
    assert store.session("g").log()[0].detail == {"from": "s", "at": None}
    assert [(x.name, x.head, x.base, x.version, x.length, x.auto) for x in s.snapshots()] == [
        ("cp", 3, 0, 1, 3, False),
        ("auto:pre-rollback@v6", 4, 3, 6, 0, True),
    ]


def test_errors_name_the_session_and_snapshot(store: Any) -> None:
    s = store.session("s")
    s.append([Message.user("a")])
    store.session("t").append([Message.user("b")])
    with pytest.raises(memvault.ConflictError, match="session 't' already exists"):
        s.fork("t")
    with pytest.raises(memvault.SnapshotNotFoundError, match="session 's' has no snapshot 'x'"):
        s.fork("u", at="x")
    with pytest.raises(memvault.SnapshotNotFoundError, match="session 'z' has no snapshot 'x'"):
        store.session("z").fork("u", at="x")  # a missing source has no snapshot either
    with pytest.raises(memvault.SnapshotNotFoundError, match="session 's' has no snapshot 'x'"):
        s.rollback("x")
    with pytest.raises(memvault.ConflictError, match="session 's' is at version 1, expected 5"):
        s.append([Message.user("c")], expect_version=5)
    s.append([Message.user("d", id="d")])
    with pytest.raises(
        memvault.DuplicateMessageError,
        match=re.escape(
            "session 's': 1 of 2 message ids are already stored (e.g. 'd'); nothing was written"
        ),
    ):
        s.append([Message.user("e", id="e"), Message.user("d", id="d")])
    with pytest.raises(memvault.ConflictError, match=r"^session 's' does not store message 'zz'$"):
        s.append([Message.user("e", id="e")], expect_message="zz")
    assert store.session("z").fork("empty").history() == []
    assert store.session("empty").log()[0].detail == {"from": "z", "at": None}


def test_fork_onto_an_expired_session_starts_it_afresh(store: Any, clock: Clock) -> None:
    t0 = clock.now
    store.session("old").append([Message.user("stale")])
    clock.now = t0 + 20
    s = store.session("s")
    s.append([Message.user("a")])
    s.fork("old")
    assert [m.content for m in store.session("old").history()] == ["a"]


def test_memory_urls_and_options() -> None:
    for url in ("memory://", "memory:", "memory:///", "memory:/"):
        memvault.open(url).close()
    with pytest.raises(memvault.ConfigurationError, match=r"takes no path or host.*memory://X"):
        memvault.open("memory://X")
    with pytest.raises(
        memvault.ConfigurationError,
        match=r"^memory://: unsupported option "
        r"'durability'; the memory store takes no option$",
    ):
        memvault.open("memory://", durability="full")


def test_compact_counts_and_keeps_exactly_what_is_reachable(store: Any, clock: Clock) -> None:
    t0 = clock.now
    for sid in ("x1", "x2"):  # expire first: compact must still reach the live ones after
        store.session(sid).append([Message.user("1"), Message.user("2")])
    clock.now = t0 + 5
    for sid in ("a", "b"):
        s = store.session(sid)
        s.append([Message.user(f"{sid}{i}", id=f"{sid}{i}") for i in range(3)])
        s.trim(keep_last=1)  # a0, a1 hidden: garbage once the log is dropped
    clock.now = t0 + 12
    stats = store.compact(keep_events=5)
    assert (stats.sessions, stats.nodes, stats.events) == (2, 4, 0)
    stats = store.compact(keep_events=1)  # the kept trim event still reaches a0, a1
    assert (stats.sessions, stats.nodes, stats.events) == (0, 0, 2)
    stats = store.compact(keep_events=0)
    assert (stats.sessions, stats.nodes, stats.events) == (0, 4, 2)
    for sid in ("a", "b"):
        s = store.session(sid)
        assert [m.id for m in s.history()] == [f"{sid}2"] and s.log() == []
        s.append([Message.user("again", id=f"{sid}0")])  # a compacted id is free again
        assert [m.id for m in s.history()] == [f"{sid}2", f"{sid}0"]


def test_compact_keeps_the_current_history_without_snapshots_or_log(store: Any) -> None:
    s = store.session("s")
    s.append([Message.user(str(i)) for i in range(4)])
    s.snapshot("first-two-hidden")
    s.trim(keep_last=2)
    s.append([Message.user("new")])
    stats = store.compact(keep_events=0)
    assert stats.nodes == 0 and [m.content for m in s.history()] == ["2", "3", "new"]
    s.rollback("first-two-hidden")
    assert [m.content for m in s.history()] == ["0", "1", "2", "3"]


def test_mixed_writes_in_parallel_on_one_file(tmp_path: Path) -> None:
    """Every write operation, from four threads at once on one SQLite file: none fails
    with a lock error (each must take the write lock before it reads), and each
    thread's session ends as its own script says."""
    with memvault.open(f"sqlite:///{tmp_path}/m.db", durability="normal") as store:

        def work(w: int) -> None:
            s = store.session(f"s{w}")
            for i in range(25):
                s.append([Message.user(f"{i}a"), Message.user(f"{i}b")])
                s.snapshot(f"cp{i}")
                s.pop()
                s.trim(keep_last=1)
                s.rollback(f"cp{i}")
                s.fork(f"f{w}.{i}").delete()
                s.clear()
                store.compact(keep_events=2)
                store.sessions()

        assert in_threads(work, 4) == []
        assert store.sessions() == ["s0", "s1", "s2", "s3"]
        for w in range(4):
            s = store.session(f"s{w}")
            assert s.history() == [] and s.info().version == 100  # append, pop, rollback, clear
            assert len(s.snapshots()) == 50


def test_sqlite_options_are_checked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/o.db"
    with memvault.open(url, durability="normal", busy_timeout=0) as store:
        store.session("s").append([Message.user("a")])
    with memvault.open(url, busy_timeout=2.5) as store:
        assert len(store.session("s").history()) == 1
    for bad in ({"durability": "NORMAL"}, {"durability": "fsync"}):
        with pytest.raises(memvault.ConfigurationError, match="durability must be 'full' or"):
            memvault.open(url, **bad)
    for timeout in (True, -1, "30"):
        with pytest.raises(memvault.ConfigurationError, match="busy_timeout must be seconds"):
            memvault.open(url, busy_timeout=timeout)


def test_sqlite_refuses_what_it_cannot_open(tmp_path: Path) -> None:
    import sqlite3

    with pytest.raises(memvault.ConfigurationError, match=r"sqlite:///relative\.db"):
        memvault.open("sqlite:///")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(
        memvault.ConfigurationError, match=r"cannot open SQLite database .*junk\.db.*not a database"
    ):
        memvault.open(f"sqlite:///{junk}")
    newer = tmp_path / "newer.db"
    memvault.open(f"sqlite:///{newer}").close()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(
        memvault.ConfigurationError,
        match=r"by a newer memvault \(schema 99; this version reads up to "
        rf"{SCHEMA_VERSION}\)",
    ):
        memvault.open(f"sqlite:///{newer}")


def test_a_closed_sqlite_store_says_so(tmp_path: Path) -> None:
    store = memvault.open(f"sqlite:///{tmp_path}/c.db")
    store.session("s").append([Message.user("a")])
    store.close()
    with pytest.raises(memvault.BackendUnavailableError, match="the store is closed"):
        store.session("s").history()


def test_snapshot_and_rollback_on_new_or_missing_sessions(store: Any) -> None:
    fresh = store.session("fresh")
    snap = fresh.snapshot("empty")
    assert (snap.name, snap.head, snap.base, snap.version, snap.length) == ("empty", 0, 0, 0, 0)
    assert store.sessions() == ["fresh"] and fresh.info().version == 0
    with pytest.raises(
        memvault.SnapshotExistsError, match="session 'fresh' already has snapshot 'empty'"
    ):
        fresh.snapshot("empty")
    with pytest.raises(memvault.SnapshotNotFoundError, match="session 'nobody' has no snapshot"):
        store.session("nobody").rollback("empty")
    assert store.sessions() == ["fresh"]


def test_unknown_sqlite_option_names_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/u.db"
    with pytest.raises(memvault.ConfigurationError, match=f"{url}: unsupported option"):
        memvault.open(url, colour="blue")


def test_summaries_and_old_versions_expire_with_their_session(store: Any, clock: Clock) -> None:
    """summarize and history(at_version=...) read the session's expiry like every
    other call: live until expires_at (exclusive), then gone."""
    t0 = clock.now
    s = store.session("s")
    s.append([Message.user("a", id="a"), Message.user("b", id="b")])
    clock.now = t0 + 5
    assert s.summarize(Message.system("S", id="S"), through="a") == 2
    assert [m.content for m in s.history()] == ["S", "b"]
    assert [m.content for m in s.history(at_version=1)] == ["a", "b"]
    assert [m.content for m in s.history(full=True)] == ["a", "S", "b"]
    assert s.info().expires_at == utc(t0 + 15)
    clock.now = t0 + 15
    with pytest.raises(memvault.InvalidMessageError, match="'a'"):
        s.summarize(Message.system("T", id="T"), through="a")
    assert s.info() is None and s.history() == []


def test_a_missing_summary_is_named_by_its_depth(url: str) -> None:
    """A summary node the session points at but no longer stores: every read of it
    raises CorruptRecordError naming the session and the depth it stands through."""
    import sqlite3

    with memvault.open(url) as store:
        s = store.session("s")
        s.append([Message.user(x, id=x) for x in "abc"])
        s.summarize(Message.system("S", id="S"), through="b")
        if url.startswith("memory"):
            session = store.backend._data["s"]
            del session.nodes[session.ids.pop("S")]
        else:
            with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
                assert db.execute("DELETE FROM nodes WHERE msg_id = 'S'").rowcount == 1
        for read in (s.history, lambda: s.history(full=True), lambda: s.search("c")):
            with pytest.raises(
                memvault.CorruptRecordError,
                match=r"^corrupt record in session 's' at depth 2: "
                r"the message is missing$",
            ):
                read()
        s.pop()  # c: the summary is not read
        with pytest.raises(memvault.CorruptRecordError, match="'s' at depth 2: the message"):
            s.pop()


def test_damaged_events_and_snapshots_are_named(tmp_path: Path) -> None:
    """An event whose detail is JSON but not an object, and a snapshot that cannot
    be read, raise CorruptRecordError naming the session and the record exactly."""
    import sqlite3

    path = tmp_path / "d.db"
    with memvault.open(f"sqlite:///{path}") as store:
        s = store.session("s")
        s.append([Message.user("a")])
        s.snapshot("cp")
        s.append([Message.user("b")])
        with sqlite3.connect(path) as db:
            db.execute("UPDATE events SET detail = '[1]' WHERE version = 2")
            db.execute("UPDATE snapshots SET created_at = 1e300")
        with pytest.raises(
            memvault.CorruptRecordError,
            match=re.escape(
                "corrupt record in session 's': the event of version 2 cannot be decoded"
                " (not a JSON object: list)"
            ),
        ):
            s.log()
        with pytest.raises(
            memvault.CorruptRecordError,
            match=r"^corrupt record in session 's': snapshot 'cp' cannot",
        ):
            s.rollback("cp")
        assert [m.content for m in s.history()] == ["a", "b"]


@pytest.mark.parametrize(("indexed", "popped", "appended"), [(3, 3, 2), (2, 1, 1), (3, 2, 1)])
def test_a_search_before_or_after_indexing_never_shows_a_popped_message(
    url: str, indexed: int, popped: int, appended: int
) -> None:
    """Messages indexed (a search), some popped, others appended (a SQLite store
    leaves them to the next search to index): the popped ones are hidden, their
    depths held again by new messages. A read-only SQLite store cannot index the
    new ones and ranks them itself; the store that wrote them indexes them first.
    The depth equals the count of the indexed messages, of the new ones, or their
    difference in one case each: search may take the chain for linear (every
    stored message visible) only if it counts every stored message."""
    old = [f"old{i}" for i in range(indexed)]
    with memvault.open(url) as store:
        s = store.session("s")
        s.append([Message.user(w, id=w) for w in old])
        s.search("anything")
        for _ in range(popped):
            s.pop()
        s.append([Message.user(f"new{i}", id=f"new{i}") for i in range(appended)])
        visible = old[: indexed - popped] + [f"new{i}" for i in range(appended)]
        reads = [] if url.startswith("memory") else [memvault.open(f"{url}?mode=ro")]
        reads.append(store)  # after the read-only store: it indexes the new messages
        for read in reads:
            hits = read.session("s").search(" ".join(old), k=10, include_hidden=True)
            assert sorted((h.message.content, h.position) for h in hits) == sorted(
                (w, visible.index(w) + 1 if w in visible else None) for w in old
            )
            assert {h.message.content for h in read.session("s").search(" ".join(old))} == {
                w for w in old if w in visible
            }
            if read is not store:
                read.close()


def test_a_search_counts_no_summary_as_a_message(url: str) -> None:
    """As many summaries as the chain is deep, and a popped message at the head's
    depth: the popped message stays hidden (the chain is not linear)."""
    with memvault.open(url) as store:
        s = store.session("s")
        s.append([Message.user(w, id=w) for w in ("a", "b", "gone")])
        s.pop()
        s.append([Message.user("c", id="c")])
        for through in ("a", "b", "c"):
            s.summarize(Message.system(f"S{through}", id=f"S{through}"), through=through)
        assert s.search("gone") == []
        assert [h.position for h in s.search("gone", include_hidden=True)] == [None]


def test_a_read_only_search_merges_indexed_and_new_messages_by_score(tmp_path: Path) -> None:
    """A read-only SQLite store ranks the messages its index lags behind beside the
    indexed ones: every ``k`` takes the best ``k`` of both, scoped to the sessions
    searched (each hit once)."""
    url = f"sqlite:///{tmp_path}/m.db"
    words = {"s": ["fig", "fig fig fig", "pear pear"], "t": ["fig fig", "pear"]}
    with memvault.open(url) as store:
        for name, bodies in words.items():
            store.session(name).append([Message.user(bodies[0], id="i")])
        store.search("fig")  # indexes the first message of each
        for name, bodies in words.items():
            store.session(name).append(
                [Message.user(b, id=f"n{i}") for i, b in enumerate(bodies[1:])]
            )
    with memvault.open(f"{url}?mode=ro") as store:
        every = store.search("fig pear", k=10)
        assert sorted((h.session_id, h.message.content) for h in every) == sorted(
            (name, b) for name, bodies in words.items() for b in bodies
        )
        assert [h.score for h in every] == sorted((h.score for h in every), reverse=True)
        for k in range(1, len(every) + 1):
            for hits in (
                store.search("fig pear", k=k),
                store.search("fig pear", k=k, sessions=["s", "t"]),
            ):
                assert [(h.session_id, h.message.content) for h in hits] == [
                    (h.session_id, h.message.content) for h in every[:k]
                ]
            assert [h.message.content for h in store.session("s").search("fig pear", k=k)] == [
                h.message.content for h in every if h.session_id == "s"
            ][:k]
