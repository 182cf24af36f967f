"""The contract suite on a real 3-master Redis Cluster, started from redis-server
processes on private ports for this test session and stopped afterwards (or a running
one: tests/support/redis.py, ``shared_cluster``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio.connection
import redis.connection
from redis.crc import key_slot

import memvault
from memvault.backends.redis.backend import RedisBackend, translate
from memvault.backends.redis.ops import HINT, WRITE, Eval, Layout
from memvault.checks.opener import Opener
from memvault.errors import BackendUnavailableError
from memvault.paging import ORDERS
from memvault.testing import AsyncStoreContract, StoreContract
from memvault.testing.contract.inputs import WEIRD_IDS
from memvault.testing.contract.paging import check_order, walk
from tests.support.redis import (
    ClusterNode,
    RedisContract,
    flushed,
    raw_client,
    redis_cluster,
    shared_cluster,
)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ClusterNode]]:
    with shared_cluster(tmp_path_factory.mktemp("cluster")) as nodes:
        yield nodes


@pytest.fixture
def cluster_url(cluster: list[ClusterNode]) -> str:
    return flushed(f"redis://127.0.0.1:{cluster[0].port}/0?cluster=true")


class ClusterContract(RedisContract):
    @pytest.fixture
    def store_url(self, cluster_url: str) -> str:
        return cluster_url


class TestRedisCluster(ClusterContract, StoreContract):
    pass


class TestRedisClusterAsync(ClusterContract, AsyncStoreContract):
    pass


def test_sessions_spread_over_every_primary(cluster: list[ClusterNode], cluster_url: str) -> None:
    """Sessions land on all three primaries, and sessions()/compact() find every one:
    the scan must visit each primary, not just the node the client first reached."""
    ids = [f"user-{i}" for i in range(60)]
    with memvault.open(cluster_url, ttl=600) as store:
        for sid in ids:
            store.session(sid).append([memvault.Message.user(sid)])
        assert store.sessions() == sorted(ids)
        assert store.compact(keep_events=0).events == len(ids)
    holders = [s for s in cluster if s.client().dbsize() > 0]
    assert len(holders) == 3


def test_cluster_keeps_its_session_index_in_one_slot(
    cluster: list[ClusterNode], cluster_url: str
) -> None:
    """A cluster keeps the session index in one hash-tagged slot (hint.lua), beside
    its sessions spread over every primary, and pages list every session from it.
    Failing: a write script is handed the index's keys (CROSSSLOT), the index is
    not kept (a page scans), or it is kept under the single server's names."""
    ids = [f"user-{i:02}" for i in range(40)]
    with memvault.open(cluster_url) as store:
        for k, sid in enumerate(ids):
            store.session(sid).append([memvault.Message.user(sid) for _ in range(1 + k % 3)])
        assert [i.session_id for i in walk(store, 7)] == ids
        by_length = walk(store, 9, order="length", descending=True)
        assert sorted(i.session_id for i in by_length) == ids
        assert [i.length for i in by_length] == sorted((i.length for i in by_length), reverse=True)
    assert [s.client().keys("memvault:sessions:*") for s in cluster] == [[], [], []]
    index = [k for s in cluster for k in s.client().keys("memvault:{sessions}:*")]
    assert len({key_slot(k) for k in index}) == 1
    client = raw_client(cluster_url)
    try:
        assert client.zcard("memvault:{sessions}:id") == len(ids)
        assert client.hlen("memvault:{sessions}:pending") == 0
    finally:
        client.close()


@pytest.mark.parametrize("session_id", WEIRD_IDS)
def test_all_keys_of_a_session_share_one_slot(session_id: str) -> None:
    """Whatever the id holds (braces, colons, NUL), its keys hash to one slot, and the
    hash tag decodes back to that id alone."""
    keys = Layout("memvault").keys(session_id)
    assert len({key_slot(k.encode()) for k in keys}) == 1
    assert Layout("memvault").session_id(keys[0].encode()) == session_id
    others = {Layout("memvault").keys(other)[0] for other in WEIRD_IDS if other != session_id}
    assert keys[0] not in others


def test_async_store_takes_parallel_first_commands(cluster_url: str) -> None:
    """Many tasks hitting a fresh async store at once all succeed. Failing: the
    async cluster client sent them before loading its slot map, got MOVED, and
    closed every connection under the other tasks' commands."""

    async def burst(round_: int) -> None:
        store = memvault.open_async(cluster_url)
        try:
            await asyncio.gather(
                *(
                    store.session(f"r{round_}-{i}").append([memvault.Message.user("x")])
                    for i in range(16)
                )
            )
        finally:
            await store.close()

    for round_ in range(10):
        asyncio.run(burst(round_))


def test_dead_primary_is_unavailable_for_its_sessions_only(tmp_path: Path) -> None:
    """A primary goes down (its own cluster, not the shared one): its sessions raise
    BackendUnavailableError, the other primaries' sessions still read, and
    sessions() (which needs every primary) raises BackendUnavailableError."""
    ids = [f"u{i}" for i in range(30)]
    with redis_cluster(tmp_path) as servers:
        url = f"redis://127.0.0.1:{servers[0].port}/0?cluster=true"
        with memvault.open(url) as store:
            for sid in ids:
                store.session(sid).append([memvault.Message.user(sid)])
        servers[2].kill()
        for face in ("sync", "async"):
            store = Opener(url, face)()  # type: ignore[arg-type]
            try:
                lost = []
                for sid in ids:
                    try:
                        assert store.session(sid).history()[0].content == sid
                    except BackendUnavailableError:
                        lost.append(sid)
                assert 0 < len(lost) < len(ids)
                with pytest.raises(BackendUnavailableError):
                    store.sessions()
            finally:
                store.close()


def test_a_page_pipelines_its_scripts_per_primary(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's per-session scripts (the info of each listed session) go in one
    pipeline per primary, sync and async, not one round trip each. Failing: the
    cluster path sends them one by one (redis-py's cluster pipelines refuse scripts),
    so a page of 30 costs 30 round trips."""
    ids = [f"p{i:02}" for i in range(40)]
    with memvault.open(cluster_url) as store:
        for sid in ids:
            store.session(sid).append([memvault.Message.user(sid)])
    for face in ("sync", "async"):
        store = Opener(cluster_url, face)()  # type: ignore[arg-type]
        try:
            assert store.sessions_page(1).sessions  # connects, loads the scripts
            packets: list[bytes] = []
            for module in (redis.connection, redis.asyncio.connection):
                monkeypatch.setattr(
                    module.AbstractConnection,
                    "send_packed_command",
                    spying(module.AbstractConnection.send_packed_command, packets),
                )
            page = store.sessions_page(30)
            monkeypatch.undo()
            assert [i.session_id for i in page.sessions] == ids[:30]
            scripts = [p for p in packets if b"EVALSHA" in p]
            assert len(scripts) <= 6, (face, len(scripts))
        finally:
            store.close()


def spying(send: Any, packets: list[bytes]) -> Any:
    """``send_packed_command`` (sync or async) that also records each packet."""

    def record(command: Any) -> None:
        packets.append(b"".join(command) if isinstance(command, list) else bytes(command))

    if asyncio.iscoroutinefunction(send):

        async def spy_async(self: Any, command: Any, check_health: bool = True) -> None:
            record(command)
            await send(self, command, check_health)

        return spy_async

    def spy(self: Any, command: Any, check_health: bool = True) -> None:
        record(command)
        send(self, command, check_health)

    return spy


# The races of the cluster's session index (docs/redis.md, "Listing sessions"): a write
# is three steps (begin, the session's script, the index's update), so a writer may stop
# between them, and two writers' updates may arrive in either order.


def is_apply(request: Any) -> bool:
    return isinstance(request, Eval) and request.script is HINT and request.args[0] == "apply"


def check_every_walk(store: memvault.Store) -> None:
    """Every order, both ways, pages of 3: each live session once, in order, with the
    info it has now. Descending first: a page that meets a stale entry sets it right,
    and a write moves a session up its version and update time, so only a walk down
    finds it misplaced there (after passing where it should have been)."""
    infos = {sid: store.session(sid).info() for sid in store.sessions()}
    for order in ORDERS:
        for descending in (True, False):
            listed = walk(store, 3, order=order, descending=descending)
            assert {i.session_id: i for i in listed} == infos, (order, descending)
            assert len(listed) == len(infos), (order, descending)
            check_order(listed, order, descending)


def users(count: int, text: str) -> list[memvault.Message]:
    return [memvault.Message.user(f"{text} {k}") for k in range(count)]


def fill_lengths(store: memvault.Store, ids: list[str]) -> None:
    for k, sid in enumerate(ids):
        store.session(sid).append([memvault.Message.user(sid) for _ in range(1 + k % 5)])


def test_a_writer_that_stops_before_updating_the_index_is_settled(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes whose index update fails after their script ran (a new session, a
    session cut short, one grown, one deleted) succeed: the write is done, and it
    leaves nothing missing or misplaced, since the next page settles what it left
    pending (as it does for a writer that died there). Failing: the write is reported
    as failed (a caller would pop or trim twice), or pages trust the index as the
    writers left it (the new session is never listed, the cut one is met at its old
    length after the walk passed its new one)."""
    with memvault.open(cluster_url) as store:
        fill_lengths(store, [f"s{i:02}" for i in range(12)])
        real = RedisBackend._send

        def dying(self: Any, request: Any) -> Any:
            if is_apply(request):
                raise translate(redis.ConnectionError("connection lost (test)"), "test")
            return real(self, request)

        monkeypatch.setattr(RedisBackend, "_send", dying)
        assert store.session("new").append(users(3, "x")) == 1
        assert store.session("s09").trim(keep_last=1) == 2
        assert store.session("s03").append(users(9, "y")) == 2
        assert store.session("s05").delete()
        monkeypatch.undo()
        client = raw_client(cluster_url)
        try:
            assert client.hlen("memvault:{sessions}:pending") == 4
            check_every_walk(store)
            assert client.hlen("memvault:{sessions}:pending") == 0
        finally:
            client.close()


def test_a_write_begun_before_a_page_settled_it_is_refused_and_redone(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page settles a write that has begun but not yet run (its writer is slow, not
    dead); the write then runs, and its writer dies before updating the index. The
    settled write must not land behind the page's back: the session's fence refuses
    it unwritten, the writer begins again, and what it leaves is pending. Failing:
    the late write lands after the page cleared its generation, and the index never
    hears of it."""
    with memvault.open(cluster_url) as store, memvault.open(cluster_url) as pager:
        fill_lengths(store, [f"s{i:02}" for i in range(12)])
        real = RedisBackend._send
        seen: list[str] = []

        def slow_then_dying(self: Any, request: Any) -> Any:
            if self is not store.backend:
                pass
            elif isinstance(request, Eval) and request.script is WRITE and not seen:
                seen.append("write")
                pager.sessions_page(2)  # settles the write just begun
            elif is_apply(request):
                raise translate(redis.ConnectionError("connection lost (test)"), "test")
            return real(self, request)

        monkeypatch.setattr(RedisBackend, "_send", slow_then_dying)
        assert store.session("s07").append(users(8, "z")) == 2  # written once
        monkeypatch.undo()
        check_every_walk(store)


def apply_late(
    store: memvault.Store,
    monkeypatch: pytest.MonkeyPatch,
    first: Callable[[], object],
    second: Callable[[], object],
) -> None:
    """Run ``first`` (its index update held back, as if its writer stalled), then
    ``second``, then send ``first``'s update: the two arrive in the other order."""
    real = RedisBackend._send
    held: list[Any] = []

    def holding(self: Any, request: Any) -> Any:
        if is_apply(request) and not held:
            held.append(request)
            return 1
        return real(self, request)

    monkeypatch.setattr(RedisBackend, "_send", holding)
    first()
    monkeypatch.undo()
    second()
    store.backend._send(held[0])


def test_index_updates_arriving_out_of_order_keep_the_newest(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writes of one session whose index updates arrive in the other order (the
    first writer stalled), and a delete whose update arrives after the session was
    made again: the index keeps the newest state. Failing: an update applies whatever
    it carries (the session is indexed at its older length, or not at all while it
    exists: never listed)."""
    with memvault.open(cluster_url) as store:
        fill_lengths(store, [f"s{i:02}" for i in range(12)])
        apply_late(
            store,
            monkeypatch,
            lambda: store.session("s04").trim(keep_last=1),
            lambda: store.session("s04").append(users(6, "m")),
        )
        check_every_walk(store)
        apply_late(
            store,
            monkeypatch,
            lambda: store.session("s06").delete(),
            lambda: store.session("s06").append([memvault.Message.user("back")]),
        )
        check_every_walk(store)


def test_stamps_keep_their_order_when_the_clock_is_behind(
    cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's stamp may be ahead of its node's clock (a failover to a replica
    whose clock lags, or many writes in one microsecond): each write's stamp is then
    the last one plus 1, so updates arriving in the other order still keep the
    newest. Failing: a stamp that stays, or falls back towards the clock, lets the
    older update win (the session is listed at its older length, or left out)."""
    with memvault.open(cluster_url) as store:
        fill_lengths(store, [f"s{i:02}" for i in range(12)])
        client = raw_client(cluster_url)
        try:
            client.hset(
                Layout("memvault").keys("s04")[0], "stamp", int(time.time() * 1e6) + 3_600_000_000
            )  # an hour ahead
        finally:
            client.close()
        apply_late(
            store,
            monkeypatch,
            lambda: store.session("s04").trim(keep_last=1),
            lambda: store.session("s04").append(users(6, "m")),
        )
        check_every_walk(store)
        apply_late(
            store,
            monkeypatch,
            lambda: store.session("s04").append(users(2, "n")),
            lambda: store.session("s04").trim(keep_last=3),
        )
        check_every_walk(store)


def test_a_cluster_store_written_without_the_index_builds_it(
    cluster: list[ClusterNode], cluster_url: str
) -> None:
    """A cluster store written by memvault before the cluster kept an index (no
    index keys) is indexed by its first page, every session of every primary, and
    that fences no session: only settling a write begun raises a fence. Failing: an
    absent index reads as an empty store, or each session indexed gets a fence key
    (at 0, for a day)."""
    with memvault.open(cluster_url) as store:
        fill_lengths(store, [f"s{i:02}" for i in range(30)])
        for server in cluster:
            keys = server.client().keys("memvault:{sessions}:*")
            if keys:
                server.client().delete(*keys)
        check_every_walk(store)
    assert [k for s in cluster for k in s.client().keys("memvault:*:fence")] == []


def test_writes_go_on_after_the_index_lost_its_generations(cluster_url: str) -> None:
    """The node holding the index loses its data (restarted without persistence, or a
    replica behind it promoted): the generation counter starts again below the fences
    that pages raised on sessions. A write then fenced begins again above its fence,
    and the first page rebuilds the index. Failing: the write is refused again and
    again, one generation higher each time (10**12 times here: it never returns)."""
    with memvault.open(cluster_url) as store:
        fill_lengths(store, [f"s{i:02}" for i in range(6)])
        store.session("s02").append(users(1, "a"))
        client = raw_client(cluster_url)
        try:
            client.set("memvault:{sessions}:generation", 10**12)  # a store written a while
            store.backend._send(Eval(HINT, store.backend._ops.layout.hint, ["begin", "s02", ""]))
            store.sessions_page(1)  # settles it: the fence of s02 is that generation
            for key in client.keys("memvault:{sessions}:*", target_nodes="primaries"):
                client.delete(key)
        finally:
            client.close()
        assert store.session("s02").append(users(2, "b")) == 3
        check_every_walk(store)


def hint_keys(store: memvault.Store) -> tuple[str, ...]:
    """The cluster index's keys: the orders' sorted sets, pending, stamps, generation."""
    return store.backend._ops.layout.hint  # type: ignore[no-any-return]


def test_begin_hands_out_the_next_generation_above_a_fence(cluster_url: str) -> None:
    """hint.lua's 'begin' (a write about to run): the next generation, pending for its
    session until the index takes the write; given the fence that refused a write (the
    counter lost its value), the first generation above that fence, and the counter
    goes on from there. Failing: a generation at or below the fence (the write is
    refused again), the counter set back, or a write begun that no page would settle."""
    with memvault.open(cluster_url) as store:
        *_, pending, _, generation = hint_keys(store)

        def begin(session_id: str, above: str) -> int:
            return int(
                store.backend._send(Eval(HINT, hint_keys(store), ["begin", session_id, above]))
            )

        client = raw_client(cluster_url)
        try:
            client.set(generation, 41)
            assert begin("a", "") == 42
            assert begin("b", "50") == 51  # the counter is below the fence: raised
            assert begin("c", "51") == 52  # the counter's next is above it already
            assert begin("d", "53") == 54  # the counter's next is the fence itself
            assert begin("a", "") == 55
            assert int(client.get(generation)) == 55
            assert client.hgetall(pending) == {
                b"42": b"a",
                b"51": b"b",
                b"52": b"c",
                b"54": b"d",
                b"55": b"a",
            }
        finally:
            client.close()


def test_the_index_holds_the_live_sessions_only(cluster_url: str) -> None:
    """The cluster's index holds an entry (in every order, and a stamp) for each live
    session and nothing else: a delete takes its session's out, and each session
    created takes out those of the two sessions that expired first (Redis drops their
    keys by TTL, with no script), as on a single server; compact() takes out the rest.
    Failing: entries of sessions long gone pile up (pages skip them, at a cost), or a
    write that creates nothing prunes."""
    with memvault.open(cluster_url, ttl=1.0) as short, memvault.open(cluster_url) as store:
        *orders, _, stamps, _ = hint_keys(store)
        client = raw_client(cluster_url)

        def indexed() -> set[str]:
            held = [{m.decode() for m in client.zrange(key, 0, -1)} for key in orders]
            held.append({k.decode() for k in client.hkeys(stamps)})
            assert all(ids == held[0] for ids in held), held
            return held[0]

        try:
            for i in range(4):
                short.session(f"gone-{i}").append([memvault.Message.user("x")])
            for sid in ("keep", "del"):
                store.session(sid).append([memvault.Message.user("x")])
            assert store.session("del").delete()
            assert indexed() == {"gone-0", "gone-1", "gone-2", "gone-3", "keep"}
            time.sleep(1.3)
            store.session("keep").append([memvault.Message.user("y")])
            assert indexed() == {"gone-0", "gone-1", "gone-2", "gone-3", "keep"}
            store.session("new").append([memvault.Message.user("y")])
            assert indexed() == {"gone-2", "gone-3", "keep", "new"}
            store.compact()
            assert indexed() == {"keep", "new"}
        finally:
            client.close()
