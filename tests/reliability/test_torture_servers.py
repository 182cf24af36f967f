"""``memvault torture --server``: private servers SIGKILLed and restarted during the
run, a proxy cutting connections, a Redis Cluster, and proof that the audit sees an
acknowledged write a crashed server lost."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memvault import ConfigurationError
from memvault.checks.opener import Opener
from memvault.torture import TortureReport, TortureSettings, audit_history, run_torture
from memvault.torture.servers import PrivateServer, RedisServer, start_server
from tests.reliability.test_torture import torture_cli

pytestmark = pytest.mark.slow


def torture(server: PrivateServer, tmp_path: Path, **knobs: object) -> TortureReport:
    settings = TortureSettings(
        **{
            "writers": 3,
            "readers": 1,
            "seconds": 10,
            "kill_rate": 0.5,
            "seed": 3,
            "history": str(tmp_path),
            **knobs,
        }
    )  # type: ignore[arg-type]
    try:
        return audit_history(run_torture(Opener(server.url), settings, server=server))
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_server_kills_lose_nothing_acknowledged(kind: str, tmp_path: Path) -> None:
    """The server (Redis with AOF always; PostgreSQL) SIGKILLed and restarted about
    once a second: the audit counts the kills and finds every acknowledged change."""
    report = torture(start_server(kind), tmp_path, server_faults=("kill",), server_fault_rate=1.0)
    assert report.ok, report.summary()
    assert report.server_kills >= 3, report.summary()
    assert report.operations["append"].ok > 0
    # the kills cut calls short: some appends' outcome was unknown, some failed
    append = report.operations["append"]
    assert append.unknown + append.failed > 0, append


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_proxy_cuts_before_requests_and_mid_reply(kind: str, tmp_path: Path) -> None:
    """Workers reach the server through the cutting proxy: requests dropped, replies
    cut half-way, connections refused during outages; both error paths are taken
    (failed: nothing applied; unknown: maybe applied) and nothing acknowledged is lost."""
    report = torture(
        start_server(kind),
        tmp_path,
        server_faults=("proxy",),
        server_fault_rate=0.5,
        cut_rate=0.05,
        seconds=20,
    )
    assert report.ok, report.summary()
    assert report.cuts["before"] > 0 and report.cuts["mid-reply"] > 0, report.cuts
    assert report.outages > 0 and report.server_kills == 0
    ops = report.operations.values()
    assert sum(s.unknown for s in ops) > 0 and sum(s.failed for s in ops) > 0


def test_redis_cluster_node_kills(tmp_path: Path) -> None:
    """A 3-primary Redis Cluster, one primary SIGKILLed and restarted at a time."""
    report = torture(
        start_server("redis-cluster"),
        tmp_path,
        server_faults=("kill",),
        server_fault_rate=1.0,
        seconds=8,
    )
    assert report.ok, report.summary()
    assert report.server_kills >= 1 and report.operations["append"].ok > 0


def test_a_server_that_forgets_is_caught(tmp_path: Path) -> None:
    """The same run on a Redis without persistence: each kill loses what it held, and
    the audit reports acknowledged writes lost (it does not vouch for a crash it did
    not survive)."""
    report = torture(
        RedisServer(tmp_path / "volatile", durable=False),
        tmp_path,
        server_faults=("kill",),
        server_fault_rate=1.0,
    )
    assert report.server_kills >= 3
    assert not report.ok and report.findings["lost"].count > 0, report.summary()


def test_server_faults_need_a_private_server(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--server"):
        run_torture(f"sqlite:///{tmp_path}/t.db", TortureSettings(server_faults=("kill",)))
    with pytest.raises(ConfigurationError, match="server faults are"):
        run_torture(f"sqlite:///{tmp_path}/t.db", TortureSettings(server_faults=("fire",)))
    cluster = start_server("redis-cluster")
    try:
        with pytest.raises(ConfigurationError, match="proxy faults need a single server"):
            run_torture(
                Opener(cluster.url), TortureSettings(server_faults=("proxy",)), server=cluster
            )
    finally:
        cluster.close()
    done, report = torture_cli("--server", "redis", "--url", "redis://x", tmp_path=tmp_path)
    assert done.returncode == 1 and "no --url" in done.stderr and report is None


def test_missing_binaries_are_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memvault", "torture", "--server", "redis"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "redis-server was not found on PATH" in done.stderr
    assert "Traceback" not in done.stderr


def _serving(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_cli_run_then_ctrl_c_leaves_no_server(tmp_path: Path) -> None:
    """A short CLI run with kills and proxy cuts is clean and removes its server; a
    Ctrl-C in the middle of another run stops it and its server too."""
    done, report = torture_cli(
        "--server",
        "redis",
        "--server-faults",
        "kill,proxy",
        "--seconds",
        "15",
        "--server-fault-rate",
        "2",
        "--seed",
        "5",
        "--writers",
        "2",
        "--readers",
        "1",
        tmp_path=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["server_kills"] + report["outages"] > 0, report
    assert "server kills" in done.stdout and "connections cut" in done.stdout
    port = int(re.search(r"127\.0\.0\.1:(\d+)", done.stdout)[1])  # type: ignore[index]
    assert not _serving(port)

    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memvault",
            "torture",
            "--server",
            "redis",
            "--seconds",
            "60",
            "--history",
            str(tmp_path / "h2"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # As from a terminal: a shell's background job (CI's runner) inherits SIGINT
        # ignored, and Python then never turns it into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert run.stdout is not None
    line = ""
    while "for 60 s" not in line:
        line = run.stdout.readline()
        assert line, "torture ended before it started"
    port = int(re.search(r"127\.0\.0\.1:(\d+)", line)[1])  # type: ignore[index]
    assert _serving(port)
    time.sleep(2)
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=120)
    assert not _serving(port)
