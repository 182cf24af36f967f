"""Private servers for ``memvault torture --server``: started on free ports in a
folder of their own, SIGKILLed and restarted on the same files during the run, and
killed (files removed) at the end.

* :class:`RedisServer`: one ``redis-server`` with AOF and ``appendfsync always``
  (``durable=False``: no persistence at all, to show what the audit reports when a
  server loses acknowledged writes).
* :class:`RedisCluster`: three such servers as a Redis Cluster of three primaries
  (no replicas); a kill takes one primary down and restarts it.
* :class:`PostgresServer`: a cluster made by ``initdb`` and run by ``postgres``
  (``fsync`` and ``synchronous_commit`` on, PostgreSQL's defaults); a kill SIGKILLs
  the postmaster and every process it started, then it recovers from its WAL. As
  root, the binaries run as the ``postgres`` user (``initdb`` refuses root).

A missing binary is a :class:`~memvault.errors.ConfigurationError` naming it.
"""

from __future__ import annotations

import glob
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from memvault.errors import ConfigurationError

START_TIMEOUT = 60.0


class PrivateServer(Protocol):
    """What the torture runner needs from a server it crashes."""

    kind: str

    @property
    def url(self) -> str:
        """The store URL, straight to the server."""

    @property
    def address(self) -> tuple[str, int] | None:
        """Where a proxy forwards to (None: clients must reach several nodes)."""

    def crash(self, rng: random.Random) -> None:
        """SIGKILL the server (or one node of it) and start it again on the same files."""

    def close(self) -> None:
        """Kill every process and remove the files."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary(name: str, where: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ConfigurationError(f"{name} was not found on PATH: --server needs {where}")
    return found


def _wait(
    ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise ConfigurationError(f"{what} did not start:\n{tail}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and every process whose parent it is (one level: a postmaster's
    children), leaving no time for a goodbye; returns the children's ids.

    ``pid`` is stopped first, so it cannot fork a child after the list is taken."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return []
    children = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.split("/")[2]))
    for target in (pid, *children):
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return children


class _Single:
    """One server process on a free local port, with its files in ``folder``.

    Subclasses give :meth:`command` and :meth:`ready`. The process runs in a session
    of its own: a Ctrl-C in the terminal reaches torture, which kills the server,
    not the server itself (which would shut down cleanly).
    """

    kind = ""
    log_name = ""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.run_as: dict[str, Any] = {}  # Popen's user/group options for the server

    @property
    def address(self) -> tuple[str, int] | None:
        return ("127.0.0.1", self.port)

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        log = self.folder / self.log_name
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                **self.run_as,
            )
        _wait(self.ready, self.process, f"{self.kind} on port {self.port}", log)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to clients."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def crash(self, rng: random.Random) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


class RedisServer(_Single):
    """A private ``redis-server``; ``config`` adds arguments (cluster settings)."""

    kind = "redis"
    log_name = "redis.log"

    def __init__(self, folder: Path, *config: str, durable: bool = True) -> None:
        binary = _binary("redis-server", "redis-server (Debian package 'redis-server')")
        super().__init__(folder)
        persistence = (
            ("--appendonly", "yes", "--appendfsync", "always")
            if durable
            else ("--appendonly", "no")
        )
        self.args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(folder),
            "--save",
            "",
            "--logfile",
            str(folder / "redis.log"),
            *persistence,
            *config,
        ]
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        return self.args

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))  # up, with a password
        except OSError:
            return False


class RedisCluster:
    """A Redis Cluster of ``masters`` private primaries, no replicas; ``node`` makes
    each (with ``durable``: AOF ``always``)."""

    kind = "redis-cluster"
    address = None  # clients follow the nodes' own addresses: no proxy in between

    def __init__(
        self,
        folder: Path,
        masters: int = 3,
        *,
        durable: bool = True,
        node: type[RedisServer] = RedisServer,
    ) -> None:
        self.cli = cli = _binary("redis-cli", "redis-cli (Debian package 'redis-tools')")
        self.folder = folder
        self.nodes: list[RedisServer] = []
        try:
            for i in range(masters):
                where = folder / f"node{i}"
                self.nodes.append(
                    node(
                        where,
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        str(free_port()),
                        "--cluster-config-file",
                        str(where / "nodes.conf"),
                        durable=durable,
                    )
                )
            subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *[f"127.0.0.1:{n.port}" for n in self.nodes],
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=START_TIMEOUT,
            )
            self._wait_ok()
        except BaseException:
            self.close()
            raise

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        ok = ("cluster_state:ok", f"cluster_known_nodes:{len(self.nodes)}")
        for node in self.nodes:
            while not all(
                line
                in subprocess.run(
                    [self.cli, "-p", str(node.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout
                for line in ok
            ):
                if time.monotonic() > deadline:
                    raise ConfigurationError(
                        "the private Redis Cluster did not reach cluster_state:ok"
                    )
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"{self.nodes[0].url}?cluster=true"

    def crash(self, rng: random.Random) -> None:
        """Kill one primary and restart it; back once every node says the cluster is ok."""
        rng.choice(self.nodes).crash(rng)
        self._wait_ok()

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def _postgres_bin(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        versions = sorted(
            glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
            key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
        )
        found = versions[-1] if versions else None
    if found is None:
        raise ConfigurationError(
            f"{name} was not found on PATH nor in /usr/lib/postgresql/*/bin: --server "
            f"postgres needs the PostgreSQL server binaries (Debian package 'postgresql')"
        )
    return found


def accepts_connections(url: str) -> bool:
    """Whether a PostgreSQL server (or a pooler in front of one) at ``url`` lets us in."""
    import psycopg  # the postgres extra; the store under test needs it anyway

    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True


def run_as_postgres(folder: Path, what: str) -> dict[str, Any]:
    """Popen's options running a server as the ``postgres`` user when we are root (as
    PostgreSQL and PgBouncer require), ``folder`` made its own; ``{}`` otherwise.

    Popen switches user itself, so the server is our own child: killed, it is reaped by
    our wait(). Under a wrapper (runuser) killed alongside it, it could be orphaned as
    a zombie that PID 1 here never reaps; its id then stays taken (a postmaster's next
    start refuses the lock file).

    Raises:
        ConfigurationError: root, and no ``postgres`` user (``what`` needs one).
    """
    if os.geteuid() != 0:
        return {}
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        raise ConfigurationError(
            f"{what} as root needs a 'postgres' user to run the server as"
        ) from None
    os.chown(folder, owner.pw_uid, owner.pw_gid)
    return {
        "user": owner.pw_uid,
        "group": owner.pw_gid,
        "extra_groups": [],
        "env": {**os.environ, "HOME": owner.pw_dir, "USER": "postgres"},
    }


class PostgresServer(_Single):
    """A private PostgreSQL cluster (``initdb``, trust authentication, local only)."""

    kind = "postgres"
    log_name = "postgres.log"

    def __init__(self, folder: Path) -> None:
        initdb, self.binary = _postgres_bin("initdb"), _postgres_bin("postgres")
        super().__init__(folder)
        self.data = folder / "data"
        self.run_as = run_as_postgres(folder, "--server postgres")  # initdb refuses root
        done = subprocess.run(
            [
                initdb,
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            **self.run_as,
        )
        if done.returncode:
            raise ConfigurationError(f"initdb failed: {done.stderr[-1500:]}")
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def command(self) -> list[str]:
        # syncfs: crash recovery syncs the data folder with one call instead of an
        # fsync per file (seconds on a busy disk); fsync and synchronous_commit are
        # PostgreSQL's defaults, spelled out.
        return [
            self.binary,
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.folder),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=on",
            "-c",
            "synchronous_commit=on",
            "-c",
            "max_connections=200",
            "-c",
            "recovery_init_sync_method=syncfs",
        ]

    def ready(self) -> bool:
        return accepts_connections(self.url)

    def kill(self) -> None:
        """SIGKILL the postmaster and its children (no shutdown checkpoint)."""
        if self.process is None:
            return
        children = _kill_tree(self.process.pid)  # the postmaster itself (see __init__)
        self.process.wait()
        self.process = None
        deadline = time.monotonic() + 10  # the children hold the shared memory
        while any(map(_alive, children)) and time.monotonic() < deadline:
            time.sleep(0.01)


KINDS = ("redis", "postgres", "redis-cluster")


def start_server(kind: str) -> PrivateServer:
    """Start a private server of ``kind`` (one of :data:`KINDS`) in a new temporary
    folder (one the ``postgres`` user can reach)."""
    if kind not in KINDS:
        raise ConfigurationError(f"--server is one of {', '.join(KINDS)}, not {kind!r}")
    where = Path(tempfile.mkdtemp(prefix=f"memvault-{kind}-"))
    try:
        if kind == "redis":
            return RedisServer(where)
        if kind == "redis-cluster":
            return RedisCluster(where)
        return PostgresServer(where)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
