"""Redis for the tests: the shared server (a database of our own), and private
``redis-server`` processes (single or a 3-master cluster) for faults and restarts.

The shared server is ``$MEMVAULT_TEST_REDIS_URL`` (default database 9 of
127.0.0.1:6379), flushed before each test with FLUSHDB, never FLUSHALL. A missing
server fails the test with a message saying so; it is never skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from memvault.backends.redis_ops import Layout

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
        pytest.fail(f"Redis is required at {url} (set MEMVAULT_TEST_REDIS_URL to use "
                    f"another server): {exc}")
    return url


def redis_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The registry's URL maker: the shared test database, emptied."""
    return flushed()


def corrupt(url: str, session_id: str, depth: int, body: str, prefix: str = "memvault") -> None:
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
    _, msgs, links, _, snaps, log = Layout(prefix).keys(session_id)
    client = raw_client(url)
    try:
        if kind == "missing":
            assert client.hdel(msgs, depth) == 1 and client.hdel(links, depth) == 1
        elif kind == "self-parent":
            _, node_depth, msg_id = client.hget(links, depth).split(b":", 2)
            assert int(node_depth) == depth
            client.hset(links, depth, b"%d:%d:%s" % (depth, depth, msg_id))
        elif kind == "event":
            client.lset(log, -1, "not json {")
        else:
            [name] = [n for n, v in client.hgetall(snaps).items() if json.loads(v)[0] == 1]
            client.hset(snaps, name, "[1, 2")
    finally:
        client.close()


class RedisContract:
    """What the contract suite needs from a Redis test class, but the store URL."""

    @pytest.fixture
    def store_url(self) -> str:
        return flushed()

    def corrupt(self, store: Any, session_id: str, depth: int, body: str) -> None:
        corrupt(store.options.url, session_id, depth, body)

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        damage(store.options.url, session_id, depth, kind)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A private ``redis-server`` process on a free port, with its data in ``folder``.

    Args:
        folder: working directory (AOF/RDB files, logs, the unix socket).
        config: extra ``redis-server`` arguments, e.g. ``["--appendonly", "yes"]``.
        password: the ``requirepass`` the config sets, if any (for :meth:`client`).
    """

    def __init__(self, folder: Path, *config: str, password: str | None = None) -> None:
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is required (Debian package 'redis-server')")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.socket = str(folder / "redis.sock")
        self.config = config
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **options: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, **options)

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.folder), "--unixsocket", self.socket, "--save", "",
                "--logfile", str(self.folder / "redis.log"), *self.config]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.client(socket_timeout=1) as c:
                    c.ping()
                return
            except redis.RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                    pytest.fail(f"redis-server on port {self.port} did not start:\n{log}")
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown save, no goodbye to clients."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()


@contextmanager
def redis_cluster(folder: Path, masters: int = 3) -> Iterator[list[RedisServer]]:
    """A real Redis Cluster of ``masters`` primaries and no replicas; stopped on exit."""
    servers: list[RedisServer] = []
    try:
        for i in range(masters):
            servers.append(RedisServer(
                folder / f"node{i}", "--cluster-enabled", "yes",
                "--cluster-port", str(free_port()),
                "--cluster-config-file", str(folder / f"node{i}" / "nodes.conf")))
        subprocess.run(
            ["redis-cli", "--cluster", "create",
             *[f"127.0.0.1:{s.port}" for s in servers],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        while not all(_cluster_ready(s) for s in servers):
            if time.monotonic() > deadline:
                pytest.fail("the Redis cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        yield servers
    finally:
        for server in servers:
            server.kill()


def _cluster_ready(server: RedisServer) -> bool:
    with server.client() as c:
        info = c.execute_command("CLUSTER", "INFO").decode()
    return "cluster_state:ok" in info and "cluster_known_nodes:3" in info


class ReplyDropper:
    """A TCP proxy in front of a server that can swallow replies: while ``drop`` is
    set, a command still reaches the server and runs, but the proxy closes the
    client's connection instead of passing the reply on (a reply lost in transit).
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self.drop.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._listener.close()
