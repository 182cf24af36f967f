"""Redis for the tests: the shared server (a database of our own), and private
``redis-server`` processes (single or a 3-master cluster) for faults and restarts.

The shared server is ``$MEMVAULT_TEST_REDIS_URL`` (default database 9 of
127.0.0.1:6379), flushed before each test with FLUSHDB, never FLUSHALL. A missing
server fails the test with a message saying so; it is never skipped. The cluster the
tests share is started for the session, or is ``$MEMVAULT_TEST_REDIS_CLUSTER_URL``'s
when that is set (see :func:`shared_cluster`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import redis
import redis.cluster

from memvault.backends.redis.ops import Layout
from memvault.torture import servers
from memvault.torture.servers import free_port as free_port  # re-exported for the tests

SHARED_URL = os.environ.get("MEMVAULT_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


def raw_client(url: str) -> Any:
    """A plain redis-py client on a store URL (``?cluster=true`` selects the cluster one)."""
    if url.endswith("?cluster=true"):
        return redis.cluster.RedisCluster.from_url(url.removesuffix("?cluster=true"))
    return redis.Redis.from_url(url)


def flushed(url: str = SHARED_URL) -> str:
    """``url`` after emptying its database; fails the test if Redis is not there."""
    try:
        client = raw_client(url)
        try:
            client.flushdb()  # a cluster client sends it to every primary
        finally:
            client.close()
    except (redis.RedisError, redis.cluster.RedisClusterException) as exc:
        pytest.fail(
            f"Redis is required at {url} (set MEMVAULT_TEST_REDIS_URL to use another server): {exc}"
        )
    return url


def redis_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The registry's URL maker: the shared test database, emptied."""
    return flushed()


def corrupt(
    url: str, session_id: str, depth: int, body: str | bytes, prefix: str = "memvault"
) -> None:
    """Overwrite the stored message at ``depth`` of the session's visible chain."""
    meta, msgs, links = Layout(prefix).keys(session_id)[:3]
    client = raw_client(url)
    try:
        node = int(client.hget(meta, "head"))
        while True:
            parent, node_depth = client.hget(links, node).split(b":")[:2]
            if int(node_depth) == depth:
                break
            node = int(parent)
        client.hset(msgs, node, body)
    finally:
        client.close()


def damage(url: str, session_id: str, depth: int, kind: str, prefix: str = "memvault") -> None:
    """Break a session as CorruptionContract.damage describes (on a chain whose node
    ids are its depths: one append, nothing popped)."""
    meta, msgs, links, _, snaps, log = Layout(prefix).keys(session_id)
    client = raw_client(url)
    try:
        if kind == "missing":
            assert client.hdel(msgs, depth) == 1 and client.hdel(links, depth) == 1
        elif kind == "summary":
            node = max(
                int(n)
                for n, link in client.hgetall(links).items()
                if int(link.split(b":")[1]) == depth
            )
            assert client.hdel(msgs, node) == 1 and client.hdel(links, node) == 1
        elif kind == "self-parent":
            _, node_depth, msg_id = client.hget(links, depth).split(b":", 2)
            assert int(node_depth) == depth
            client.hset(links, depth, b"%d:%d:%s" % (depth, depth, msg_id))
        elif kind == "event":
            client.lset(log, -1, "not json {")
        else:
            [(name, value)] = [
                (n, json.loads(v))
                for n, v in client.hgetall(snaps).items()
                if json.loads(v)[0] == 1
            ]
            field = {
                "snapshot-length": (4, -7),
                "snapshot-head": (1, 999),
                "snapshot-head-next": (1, int(client.hget(meta, "next"))),
                "snapshot-head-below-0": (1, -1),
                "snapshot-base-below-0": (2, -1),
            }.get(kind)
            if field:
                value[field[0]] = field[1]
            client.hset(snaps, name, json.dumps(value) if field else "[1, 2")
    finally:
        client.close()


class RedisContract:
    """What the contract suite needs from a Redis test class, but the store URL."""

    @pytest.fixture
    def store_url(self) -> str:
        return flushed()

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        corrupt(store.options.url, session_id, depth, body)

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        damage(store.options.url, session_id, depth, kind)


class RedisServer(servers.RedisServer):
    """A private ``redis-server`` (memvault's torture one) on a free port, with its data
    in ``folder`` and a unix socket; no persistence unless ``config`` turns it on (a
    later argument wins).

    Args:
        folder: working directory (AOF/RDB files, logs, the unix socket).
        config: extra ``redis-server`` arguments, e.g. ``["--appendonly", "yes"]``.
        password: the ``requirepass`` the config sets, if any (for :meth:`client`).
    """

    def __init__(
        self, folder: Path, *config: str, password: str | None = None, durable: bool = False
    ) -> None:
        self.password = password
        self.socket = str(folder / "redis.sock")
        super().__init__(folder, "--unixsocket", self.socket, *config, durable=durable)

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **options)

    def restart(self) -> None:
        self.kill()
        self.start()


@contextmanager
def redis_cluster(folder: Path, masters: int = 3) -> Iterator[list[RedisServer]]:
    """A real Redis Cluster of ``masters`` primaries and no replicas; stopped on exit."""
    cluster = servers.RedisCluster(folder, masters, durable=False, node=RedisServer)
    try:
        yield cast(list[RedisServer], cluster.nodes)
    finally:
        cluster.close()


CLUSTER_URL = "MEMVAULT_TEST_REDIS_CLUSTER_URL"


@dataclass(frozen=True)
class ClusterNode:
    """A primary of the cluster the tests share."""

    port: int

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **options)


@contextmanager
def shared_cluster(folder: Path) -> Iterator[list[ClusterNode]]:
    """The cluster the tests share (each test empties it): the running one at
    ``$MEMVAULT_TEST_REDIS_CLUSTER_URL`` (a node's ``redis://127.0.0.1:port/0``; set by
    tools/mutate_scripts.py, which runs many pytest processes on one cluster), else a
    private one started in ``folder`` and stopped on exit."""
    url = os.environ.get(CLUSTER_URL)
    if not url:
        with redis_cluster(folder) as servers:
            yield [ClusterNode(s.port) for s in servers]
        return
    client = redis.cluster.RedisCluster.from_url(url)
    try:
        ports = sorted(node.port for node in client.get_primaries())
    finally:
        client.close()
    yield [ClusterNode(port) for port in ports]
