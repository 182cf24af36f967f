"""The demo's worker processes: Ctrl-C and a failed worker are one line, exit 1."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def workers(pid: int) -> list[int]:
    """The demo's worker processes (multiprocessing's spawn children of ``pid``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if ppid == pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@contextmanager
def demo_blocked_in_a_worker(url: str, db: Path) -> Iterator[subprocess.Popen[str]]:
    """``memvault demo`` in its own process group, its first worker running and stuck
    on the write lock this test takes as soon as the demo announces that worker."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memvault", "--url", url, "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lock = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("1. process agent-1"):
                break
        lock = sqlite3.connect(db, isolation_level=None, timeout=30)
        lock.execute("BEGIN IMMEDIATE")
        deadline = time.monotonic() + 60
        while not workers(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if lock is not None:
            lock.close()


def test_ctrl_c_during_the_demo_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C reaches the whole process group: the workers print no traceback, the
    demo says 'interrupted' once and exits 1."""
    db = tmp_path / "demo.db"
    with demo_blocked_in_a_worker(f"sqlite:///{db}", db) as proc:
        assert workers(proc.pid), "the demo's worker never started"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert err == "error: interrupted\n", err


def test_a_failed_worker_is_one_line(tmp_path: Path) -> None:
    """The worker cannot take the write lock (busy_timeout=0): one line naming the
    worker and its error, exit 1, no traceback from either process."""
    db = tmp_path / "demo.db"
    with demo_blocked_in_a_worker(f"sqlite:///{db}?busy_timeout=0", db) as proc:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert "agent_one" in err and "locked" in err, err
