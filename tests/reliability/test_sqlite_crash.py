"""SQLite under crashes and full disks: real processes, real SIGKILLs, real write errors.

After every crash: ``PRAGMA integrity_check`` is ok, no batch is half-written (its
messages are all stored, adjacent and in order, or none is), every acknowledged
append is stored, and the next writer gets the lock. A write that hits a full disk
or a file-size limit raises ``BackendError`` and loses nothing written before.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import BackendError, Message
from memvault.backends.base import Write
from memvault.backends.engine.core import Row, Txn
from memvault.backends.sqlite.backend import SqliteBackend
from memvault.checks.opener import Opener

pytestmark = pytest.mark.slow
SPAWN = multiprocessing.get_context("spawn")


def batch(tag: str, size: int = 5, text: str = "x" * 2000) -> list[Message]:
    return [
        Message(id=f"{tag}.m{k}", role="user", content=f"{text} {tag} {k} é👍\x00")
        for k in range(size)
    ]


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def stored_nodes(path: Path) -> dict[str, tuple[int, int, int]]:
    """msg_id -> (node, parent, depth), straight from the table."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT n.msg_id, n.node, n.parent, n.depth FROM nodes n JOIN sessions s"
            " ON s.sid = n.sid WHERE s.name = 'crash'"
        ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def assert_whole(ids: list[str], nodes: dict[str, tuple[int, int, int]]) -> bool:
    """All of a batch or none of it; if all, chained in order. Returns: stored?"""
    present = [nodes[i] for i in ids if i in nodes]
    assert len(present) in (0, len(ids)), f"half-written batch: {len(present)}/{len(ids)}"
    for (n1, _, d1), (_, p2, d2) in itertools.pairwise(present):
        assert (p2, d2) == (n1, d1 + 1), f"batch {ids[0]} is not chained in order"
    return bool(present)


# --- SIGKILL at a chosen point inside the transaction ---------------------------------


class StallingBackend(SqliteBackend):
    """Stops inside its write transaction once everything is written, just before
    COMMIT, and tells the test so through a marker file."""

    def __init__(self, path: str, marker: str, stall_on: str) -> None:
        super().__init__(path)
        self.marker, self.stall_on = marker, stall_on

    def _commit(
        self,
        txn: Txn,
        row: Row,
        op: str,
        w: Write,
        before: tuple[int, int],
        detail: dict[str, object],
        *,
        bump: bool = True,
    ) -> None:
        super()._commit(txn, row, op, w, before, detail, bump=bump)
        if op == self.stall_on:
            Path(self.marker).write_text(op)
            time.sleep(600)


def stall(opener: Opener, op: str) -> None:
    store = opener(writer="victim")
    s = store.session("crash")
    if op == "append":
        s.append(batch("doomed"))
    else:
        s.rollback("cp")


@pytest.mark.parametrize("op", ["append", "rollback"])
def test_sigkill_just_before_commit_leaves_no_trace(op: str, tmp_path: Path) -> None:
    """Killed with every row of the operation written but not committed: the database
    is intact and reads exactly as before, and the next writer proceeds."""
    path, marker = tmp_path / "x.db", tmp_path / "inside"
    url = f"sqlite:///{path}"
    with memvault.open(url) as store:
        s = store.session("crash")
        s.append(batch("a"))
        s.snapshot("cp")
        s.append(batch("b"))
        before = (s.history(), s.snapshots(), s.log(), s.info())
    opener = Opener(
        "stalling",
        factory=StallingBackend,
        options={"path": str(path), "marker": str(marker), "stall_on": op},
    )
    child = SPAWN.Process(target=stall, args=(opener, op))
    child.start()
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert child.is_alive() and time.monotonic() < deadline, "the child never got there"
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join()
    assert integrity(path) == "ok"
    assert not any(mid.startswith("doomed") for mid in stored_nodes(path))
    with memvault.open(url, busy_timeout=5) as store:
        s = store.session("crash")
        assert (s.history(), s.snapshots(), s.log(), s.info()) == before
        s.rollback("cp")  # the lock was released by the kill
        s.append(batch("c"))
        assert [m.id for m in s.history()][-1] == "c.m4"


# --- SIGKILL at random moments ---------------------------------------------------------


def churn(url: str, log_path: str, round_no: int) -> None:
    """Append 5-message batches; every 3rd a snapshot, every 4th a rollback."""
    rng = random.Random(round_no)
    log = Path(log_path).open("a", encoding="utf-8")
    with memvault.open(url, writer=f"churn-{round_no}") as store:
        s = store.session("crash")
        for i in range(1, 10**6):
            messages = batch(f"r{round_no}.b{i}")
            log.write(json.dumps({"invoke": [m.id for m in messages]}) + "\n")
            log.flush()
            s.append(messages)
            log.write(json.dumps({"ok": [m.id for m in messages]}) + "\n")
            log.flush()
            if i % 3 == 0:
                s.snapshot(f"r{round_no}.s{i}")
            if i % 4 == 0:
                s.rollback(rng.choice([x.name for x in s.snapshots()]))


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_random_sigkills_during_appends_and_rollbacks(durability: str, tmp_path: Path) -> None:
    path, log = tmp_path / "x.db", tmp_path / "log.jsonl"
    url = f"sqlite:///{path}"
    memvault.open(url).close()
    rng = random.Random(durability)
    for round_no in range(5):
        child = SPAWN.Process(target=churn, args=(url, str(log), round_no))
        child.start()
        deadline = time.monotonic() + 120
        while f'"r{round_no}.b1.m0' not in (log.read_text() if log.exists() else ""):
            assert child.is_alive() and time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(rng.uniform(0.05, 0.6))
        child.kill()
        child.join()
        assert child.exitcode == -signal.SIGKILL
        assert integrity(path) == "ok"
    records = [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]
    nodes = stored_nodes(path)
    acked = [r["ok"] for r in records if "ok" in r]
    assert len(acked) >= 5
    for r in records:
        ids = r.get("invoke") or r["ok"]
        stored = assert_whole(ids, nodes)
        assert stored or ids not in acked, f"acknowledged batch {ids[0]} is not stored"
    with memvault.open(url) as store:
        s = store.session("crash")
        s.history()  # every visible message decodes
        for snap in s.snapshots():
            assert len(s.fork(f"check {snap.name}", at=snap.name).history()) == snap.length


# --- full disk ------------------------------------------------------------------------


def fill(url: str, limit_from: list[str], conn: Any) -> None:
    """Append until a write fails (a file-size limit just above the sizes of
    ``limit_from``, or a full filesystem); then read, and try one more append (the
    space the failed transaction took may be reused). Report through a pipe: a log
    file would be limited too."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    store = memvault.open(url)
    if limit_from:
        size = max(os.path.getsize(p) for p in limit_from if os.path.exists(p))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 200_000, size + 200_000))
    s = store.session("crash")
    for i in range(10**6):
        try:
            s.append(batch(f"b{i}", text="y" * 4000))
        except Exception as exc:
            conn.send(("failed", i, type(exc).__name__, str(exc), isinstance(exc, BackendError)))
            break
        conn.send(("ok", i))
    for _ in range(2):
        try:
            conn.send(("read", len(s.history())))
            s.append(batch("again"))
            conn.send(("again", "ok"))
        except Exception as exc:
            conn.send(("again", str(exc)))
    store.close()


def run_fill(path: Path, limit_from: list[str]) -> list[Any]:
    """Run :func:`fill` in a child process; its replies, in order."""
    parent, child_end = SPAWN.Pipe()
    child = SPAWN.Process(target=fill, args=(f"sqlite:///{path}", limit_from, child_end))
    child.start()
    replies = []
    while child.is_alive() or parent.poll():
        if parent.poll(0.5):
            replies.append(parent.recv())
    child.join()
    assert child.exitcode == 0
    return replies


def seeded(path: Path) -> list[Message]:
    with memvault.open(f"sqlite:///{path}") as store:
        store.session("crash").append(batch("seed"))
        return store.session("crash").history()


def check_after_full_disk(
    path: Path, replies: list[Any], seed: list[Message], room_after: bool
) -> None:
    acked = [r[1] for r in replies if r[0] == "ok"]
    failed = [r for r in replies if r[0] == "failed"]
    assert acked and failed, replies[-3:]
    _, index, name, message, is_backend_error = failed[0]
    assert is_backend_error and name == "BackendError", (name, message)
    assert message.startswith("SQLite failed: ")
    if sys.version_info >= (3, 11):  # the extended code says which write failed
        assert "(SQLITE_" in message, message
    assert integrity(path) == "ok"
    nodes = stored_nodes(path)
    for i in acked:
        assert assert_whole([f"b{i}.m{k}" for k in range(5)], nodes)
    assert not assert_whole([f"b{index}.m{k}" for k in range(5)], nodes)
    with memvault.open(f"sqlite:///{path}") as store:
        history = store.session("crash").history()
        assert history[:5] == seed
        again = [f"again.m{k}" for k in range(5)] if ("again", "ok") in replies else []
        assert [m.id for m in history[5:]] == [
            *(f"b{i}.m{k}" for i in acked for k in range(5)),
            *again,
        ]
        if room_after:  # the limit was the child's own: writes work again
            store.session("crash").append(batch("after"))


def test_file_size_limit_is_a_backend_error_and_loses_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (SIGXFSZ ignored): the append that cannot be written raises
    BackendError naming SQLite's error; reads keep working; everything acknowledged
    before is stored; nothing of the failed batch is."""
    path = tmp_path / "x.db"
    seed = seeded(path)
    replies = run_fill(path, [str(path), f"{path}-wal"])
    assert any(r[0] == "read" for r in replies)  # reads still work after the error
    check_after_full_disk(path, replies, seed, room_after=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs, where mounting is permitted (root with CAP_SYS_ADMIN)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_is_a_backend_error_and_loses_nothing(small_disk: Path) -> None:
    """A filesystem that runs out of space (ENOSPC, SQLITE_FULL): the same promises."""
    path = small_disk / "x.db"
    seed = seeded(path)
    replies = run_fill(path, [])
    assert "disk is full" in next(r[3] for r in replies if r[0] == "failed")
    check_after_full_disk(path, replies, seed, room_after=False)
