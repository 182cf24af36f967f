"""The contract suite on a real 3-master Redis Cluster, started from redis-server
processes on private ports for this test session and stopped afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot

import memvault
from memvault.backends.redis_ops import Layout
from memvault.checks.opener import Opener
from memvault.errors import BackendUnavailableError
from memvault.testing import AsyncStoreContract, StoreContract
from memvault.testing.contract.inputs import WEIRD_IDS
from memvault.testing.contract.paging import walk
from tests.support.redis import RedisContract, RedisServer, flushed, redis_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def cluster_url(cluster: list[RedisServer]) -> str:
    return flushed(f"redis://127.0.0.1:{cluster[0].port}/0?cluster=true")


class ClusterContract(RedisContract):
    @pytest.fixture
    def store_url(self, cluster_url: str) -> str:
        return cluster_url


class TestRedisCluster(ClusterContract, StoreContract):
    pass


class TestRedisClusterAsync(ClusterContract, AsyncStoreContract):
    pass


def test_sessions_spread_over_every_primary(cluster: list[RedisServer], cluster_url: str) -> None:
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


def test_cluster_pages_scan_without_an_index(cluster: list[RedisServer],
                                             cluster_url: str) -> None:
    """A cluster keeps no session index (a script reaches its session's slot only):
    no index key is written, and pages list every session from every primary.
    Failing: a write script is handed the index's keys (CROSSSLOT), or a cluster page
    reads an index nobody keeps (an empty listing)."""
    ids = [f"user-{i:02}" for i in range(40)]
    with memvault.open(cluster_url) as store:
        for k, sid in enumerate(ids):
            store.session(sid).append([memvault.Message.user(sid) for _ in range(1 + k % 3)])
        assert [i.session_id for i in walk(store, 7)] == ids
        by_length = walk(store, 9, order="length", descending=True)
        assert sorted(i.session_id for i in by_length) == ids
        assert [i.length for i in by_length] == sorted((i.length for i in by_length),
                                                       reverse=True)
    assert [s.client().keys("memvault:sessions:*") for s in cluster] == [[], [], []]


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
            await asyncio.gather(*(store.session(f"r{round_}-{i}").append(
                [memvault.Message.user("x")]) for i in range(16)))
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
