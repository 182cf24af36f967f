"""The Redis session index (sorted sets the write script keeps, docs/redis.md "Listing
sessions"): stores written before it existed, interrupted builds, expired sessions and
sessions whose keys went away without a script."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import memvault
from memvault.backends.redis import ops as redis_ops
from memvault.errors import OutcomeUnknownError
from memvault.messages import Message
from memvault.paging import ORDERS
from memvault.testing.contract.paging import ODD_IDS, walk
from tests.support.redis import flushed, raw_client

INDEX = "memvault:sessions:*"


@pytest.fixture
def url() -> str:
    return flushed()


@pytest.fixture
def client(url: str) -> Iterator[Any]:
    client = raw_client(url)
    yield client
    client.close()


def fill(store: memvault.Store, ids: list[str]) -> None:
    """Sessions of different versions and lengths (a pop and a trim among them)."""
    for i, sid in enumerate(ids):
        s = store.session(sid)
        s.append([Message.user(f"{sid} {k}") for k in range(1 + i % 4)])
        if i % 3 == 0:
            s.pop()
        if i % 5 == 0:
            s.trim(keep_last=1)


def expected(store: memvault.Store) -> dict[str, memvault.SessionInfo]:
    return {
        sid: info for sid in store.sessions() if (info := store.session(sid).info()) is not None
    }


def every_walk(store: memvault.Store, limit: int) -> Iterator[tuple[str, bool, list[Any]]]:
    for order in ORDERS:
        for descending in (False, True):
            yield order, descending, walk(store, limit, order=order, descending=descending)


def drop_index(client: Any) -> None:
    """What a store written by memvault before the index looks like: the same
    session keys, no index keys."""
    keys = list(client.scan_iter(match=INDEX))
    assert keys, "the store had an index to drop"
    client.delete(*keys)


def test_a_store_written_without_the_index_pages_all_its_sessions(url: str, client: Any) -> None:
    """The first page of a store written before the index existed indexes it, and
    every order lists every live session with its info. Failing: an absent index is
    read as an empty store, or the build misses sessions or sorts them wrong."""
    with memvault.open(url) as store:
        fill(store, [f"s{i:02}" for i in range(30)] + ODD_IDS)
        infos = expected(store)
        drop_index(client)
        for order, descending, listed in every_walk(store, 7):
            assert {i.session_id: i for i in listed} == infos, (order, descending)
            assert len(listed) == len(infos), (order, descending)
        assert client.get("memvault:sessions:ready") == b"1"
        store.session("after").append([Message.user("new")])
        assert "after" in [i.session_id for i in walk(store, 50)]


def test_an_interrupted_index_build_goes_on_where_it_stopped(
    url: str, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection lost in the middle of building the index (store written without
    it) leaves a resumable build: the next page finishes it without scanning again
    from the start, and lists everything. Failing: the build's progress is not saved,
    or a partial index is taken for a complete one."""
    monkeypatch.setattr(redis_ops, "_BUILD_BATCH", 10)
    with memvault.open(url) as store:
        fill(store, [f"s{i:03}" for i in range(120)])
        infos = expected(store)
    drop_index(client)
    scans: list[bytes] = []
    real = redis.Redis.execute_command

    def dropping(self: Any, *args: Any, **options: Any) -> Any:
        if args[0] == "SCAN":
            scans.append(bytes(str(args[1]), "ascii") if isinstance(args[1], int) else args[1])
            if len(scans) == 4:
                raise redis.ConnectionError("connection lost (test)")
        return real(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", dropping)
    with memvault.open(url) as store:
        with pytest.raises(OutcomeUnknownError):
            store.sessions_page(5)
        assert client.get("memvault:sessions:ready") is None
        saved = client.get("memvault:sessions:scan")
        assert saved is not None and saved != b"0"
        listed = walk(store, 9, order="length")
    assert scans[4] == saved, "the second build started where the first stopped"
    assert scans.count(b"0") == 1
    assert {i.session_id: i for i in listed} == infos
    assert client.get("memvault:sessions:scan") is None


def test_expired_sessions_leave_the_index(url: str, client: Any) -> None:
    """Sessions that Redis expired by TTL (no script runs then) are unindexed by the
    next sessions created, two per session (those that expired first), and all at
    once by compact(): the index does not grow with sessions long gone. Failing:
    expired entries are only skipped on read, never removed; or a write prunes other
    expired sessions than the first (write.lua's prune from the second, #165)."""
    with memvault.open(url, ttl=1.0) as short, memvault.open(url) as store:
        store.sessions_page()  # builds the (empty) index: compact prunes a built one
        for i in range(10):
            short.session(f"gone-{i}").append([Message.user("x")])
        store.session("keep").append([Message.user("x")])
        assert client.zcard("memvault:sessions:id") == 11
        time.sleep(1.3)
        store.session("keep").append([Message.user("y")])
        assert client.zcard("memvault:sessions:id") == 11
        for k in range(3):
            store.session(f"new-{k}").append([Message.user("y")])
        for order in ORDERS:
            assert client.zcard(f"memvault:sessions:{order}") == 11 + 3 - 6, order
        assert client.zrange("memvault:sessions:id", 0, -1) == [
            *(f"gone-{i}".encode() for i in range(6, 10)),
            b"keep",
            b"new-0",
            b"new-1",
            b"new-2",
        ]
        store.compact()
        for order in ORDERS:
            assert client.zcard(f"memvault:sessions:{order}") == 4, order
        assert client.zrange("memvault:sessions:id", 0, -1) == [
            b"keep",
            b"new-0",
            b"new-1",
            b"new-2",
        ]


def test_a_session_whose_keys_vanished_is_left_out_and_unindexed(url: str, client: Any) -> None:
    """A session whose keys went without a script (evicted under maxmemory, deleted
    by hand) is in no page, and the page that met its entry drops it. Failing: pages
    trust the index without checking each session, or keep meeting the dead entry."""
    with memvault.open(url) as store:
        fill(store, ["a", "b", "c", "d"])
        client.delete(*client.scan_iter(match="memvault:{b}:*"))
        for order, descending, listed in every_walk(store, 2):
            assert [i.session_id for i in listed if i.session_id == "b"] == [], order
            assert len(listed) == 3, (order, descending)
        for order in ORDERS:
            assert client.zscore(f"memvault:sessions:{order}", "b") is None, order


def test_a_page_goes_on_past_a_dead_entry_in_every_order(url: str, client: Any) -> None:
    """Walked one session a page, in every order and direction, a store with a dead
    index entry lists each live session once, in the order one long page lists
    them. Failing: a full page's cursor carried the session's id where its score
    belongs (a mutant of index.lua survived the suite), so the next page started
    elsewhere, or raised."""
    with memvault.open(url) as store:
        fill(store, ["a", "b", "d", "e", "f"])
        for order in ORDERS:
            for descending in (False, True):
                # a page that meets the dead entry drops it: make it anew each walk
                store.session("c").append([Message.user("c")])
                client.delete(*client.scan_iter(match="memvault:{c}:*"))
                listed = walk(store, 1, order=order, descending=descending)
                whole = walk(store, 50, order=order, descending=descending)
                assert [i.session_id for i in listed] == [i.session_id for i in whole], (
                    order,
                    descending,
                )
                assert sorted(i.session_id for i in listed) == ["a", "b", "d", "e", "f"]


def test_a_rare_match_is_walked_in_budgeted_steps(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A match walks the index in steps of a few entries (here 7) and each step goes
    on where the last one stopped: the pages are the same as in one step. Failing: a
    step that found nothing ends the listing, or the next step restarts or skips; or
    a step walked the whole index (a mutant not counting the entries it looked at
    survived the suite)."""
    ids = [f"s{i:03}" for i in range(60)]
    with memvault.open(url) as store:
        for i, sid in enumerate(ids):
            store.session(sid).append([Message.user(sid) for _ in range(1 + i % 3)])
        expected = {
            order: [walk(store, 2, order=order, match="5", descending=d) for d in (False, True)]
            for order in ORDERS
        }
        assert len(expected["id"][0]) == 15
        monkeypatch.setattr(redis_ops, "_MATCH_BUDGET", 7)
        for order in ORDERS:
            assert [
                walk(store, 2, order=order, match="5", descending=d) for d in (False, True)
            ] == expected[order], order
        steps: list[Any] = []
        send = store.backend._send

        def spy(request: Any) -> Any:
            if isinstance(request, redis_ops.Eval) and request.script is redis_ops.INDEX:
                steps.append(request)
            return send(request)

        monkeypatch.setattr(store.backend, "_send", spy)
        assert [i.session_id for i in walk(store, 2, match="s059")] == ["s059"]
        assert len(steps) >= 60 // 7  # each step looked at 7 entries at most
