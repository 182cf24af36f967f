"""A SQLite store used from threads that come and go (LangGraph's executor makes new
ones at every invoke) lends an ended thread's connection to the next new thread, and
keeps no more of them than that."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import memvault
from memvault.testing.contract.concurrency import in_threads
from tests.support.forking import exit_code, run_in_child, start_child


def open_files(path: Path) -> int:
    """This process's open files that are the database or its -wal / -shm."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd).startswith(str(path.resolve())))


@contextmanager
def holding(store: memvault.Store, threads: int = 1) -> Iterator[None]:
    """``threads`` threads at once, each holding its connection (it has read) until
    the block ends (between calls: no call of theirs is running)."""
    started, done = threading.Barrier(threads + 1), threading.Event()

    def hold() -> None:
        store.session("s").info()
        started.wait()
        done.wait()

    holders = [threading.Thread(target=hold) for _ in range(threads)]
    for holder in holders:
        holder.start()
    started.wait()
    try:
        yield
    finally:
        done.set()
        for holder in holders:
            holder.join()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_threads_connection_is_closed_when_the_thread_ends(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with memvault.open(f"sqlite:///{path}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "from the main thread"}])
        before = open_files(path)
        after_one = 0
        for n in range(20):
            worker = threading.Thread(
                target=session.append, args=([{"role": "user", "content": f"thread {n}"}],)
            )
            worker.start()
            worker.join()
            after_one = after_one or open_files(path)
        # the first thread's connection is kept for the next ones: no more than that
        assert open_files(path) == after_one <= before + 2
        assert [m.content for m in session.history()][-1] == "thread 19"
        # a thread still running keeps its connection, and the store still closes it
        with holding(store):
            assert open_files(path) > before
            store.close()
            assert open_files(path) == 0


CLOSE_UNDER_READERS = """
import sys, threading, time
import memvault
store = memvault.open(sys.argv[1])
session = store.session("s")
for n in range(50):
    session.append([{"role": "user", "content": f"message {n}"}])
go, errors, stop = threading.Barrier(4), [], threading.Event()

def read():
    go.wait()
    while not stop.is_set():
        try:
            session.history()
        except memvault.BackendUnavailableError as exc:  # the store is closed
            errors.append(str(exc))
            return
readers = [threading.Thread(target=read) for _ in range(3)]
for reader in readers:
    reader.start()
go.wait()
time.sleep(0.05)
store.close()
stop.set()
for reader in readers:
    reader.join()
assert all("closed" in e for e in errors), errors
print("ok")
"""


def test_closing_the_store_under_running_calls_does_not_crash(tmp_path: Path) -> None:
    """A server shutting down closes the store while request threads are still inside
    calls: each call finishes or raises "the store is closed". Closing a connection
    under a call running on it crashed the interpreter (SIGSEGV, every one of 3 runs
    of this script), so the store lets those connections go instead, and each closes
    when its call is done with it."""
    for attempt in range(3):
        db = tmp_path / f"c{attempt}.db"
        done = subprocess.run(
            [sys.executable, "-c", CLOSE_UNDER_READERS, f"sqlite:///{db}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


def counting_connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patches sqlite3.connect to count the connections opened (in this process)."""
    opened: list[int] = []
    connect = sqlite3.connect

    def counted(*args: object, **kwargs: object) -> sqlite3.Connection:
        opened.append(os.getpid())
        return connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", counted)
    return opened


def test_a_new_thread_takes_the_connection_of_one_that_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a connection costs ~0.2 ms and its statements compiled again: threads
    that come and go one after the other share one."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "from the main thread"}])
        opened = counting_connects(monkeypatch)
        for n in range(20):
            worker = threading.Thread(
                target=session.append, args=([{"role": "user", "content": f"thread {n}"}],)
            )
            worker.start()
            worker.join()
        assert len(opened) == 1
        with holding(store, threads=2):  # two threads at once each have their own
            pass
        assert len(opened) == 2
        assert len(session.history()) == 21


def test_a_read_left_open_by_an_ended_thread_is_not_lent_again(tmp_path: Path) -> None:
    """A thread that ends inside a read transaction (an iterator abandoned half way)
    does not hand a later thread its old snapshot."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "first"}])
        backend = store.backend

        def stuck() -> None:
            db = backend._connect()  # type: ignore[attr-defined]
            db.execute("BEGIN")
            db.execute("SELECT count(*) FROM sessions").fetchone()

        worker = threading.Thread(target=stuck)
        worker.start()
        worker.join()
        session.append([{"role": "user", "content": "second"}])
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(len(session.history())))
        reader.start()
        reader.join()
        assert seen == [2]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's idle connections are not lent to a thread of a forked child
    (SQLite's connections must not cross a fork); the child's own threads, one after
    the other, share the one it opens (a worker forked from a server that opened the
    store runs its graphs there)."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        worker = threading.Thread(
            target=session.append, args=([{"role": "user", "content": "parent"}],)
        )
        worker.start()
        worker.join()  # its connection is now idle
        opened = counting_connects(monkeypatch)

        def child() -> int:  # threads of its own append, on its own connection
            for n in range(3):
                thread = threading.Thread(
                    target=session.append, args=([{"role": "user", "content": f"child {n}"}],)
                )
                thread.start()
                thread.join()
            return 0 if opened == [os.getpid()] else 2

        assert run_in_child(child) == 0
        assert [m.content for m in session.history()] == ["parent", "child 0", "child 1", "child 2"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("on", ["the forking thread", "a new thread"])
def test_a_forked_childs_appends_outlive_the_parents_close(tmp_path: Path, on: str) -> None:
    """A worker forked from a process that had used the store appends after that
    process closed it: every append the worker was told is stored stays stored.
    With the parent's connections still open in the child, SQLite's bookkeeping there
    said the file's shared lock was held while the child held no lock at all: the
    parent's close found itself the last user, merged the WAL and deleted it, and the
    child's next append went to the deleted file (acknowledged, then gone)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = memvault.open(url)
    session = store.session("s")
    session.append([{"role": "user", "content": "parent"}])
    worker = threading.Thread(target=session.info)
    worker.start()
    worker.join()  # an ended thread's connection, kept idle
    parent_done, child_started = os.pipe(), os.pipe()

    def append(text: str) -> None:
        if on == "the forking thread":
            session.append([{"role": "user", "content": text}])
        else:
            thread = threading.Thread(
                target=session.append, args=([{"role": "user", "content": text}],)
            )
            thread.start()
            thread.join()

    def child() -> int:
        append("child 1")
        os.write(child_started[1], b"1")
        os.read(parent_done[0], 1)  # the parent has closed the store
        append("child 2")
        return 0 if [m.content for m in session.history()][-1] == "child 2" else 2

    pid = start_child(child)
    os.read(child_started[0], 1)
    store.close()
    os.write(parent_done[1], b"1")
    assert exit_code(pid) == 0
    with memvault.open(url) as again:
        assert [m.content for m in again.session("s").history()] == ["parent", "child 1", "child 2"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_parent_goes_on_after_a_forked_child_used_the_store(tmp_path: Path) -> None:
    """The child closes its copies of the parent's connections: the parent's own, and
    its locks on the file, are untouched (another process opening and closing the
    store meanwhile must not take the parent's WAL away)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with memvault.open(url) as store, holding(store):
        session = store.session("s")
        session.append([{"role": "user", "content": "before"}])

        def child() -> int:
            session.append([{"role": "user", "content": "child"}])
            return 0

        assert run_in_child(child) == 0
        with memvault.open(url) as other:
            other.session("s").info()
        session.append([{"role": "user", "content": "after"}])
        with memvault.open(url) as again:
            assert [m.content for m in again.session("s").history()] == ["before", "child", "after"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_inside_a_transaction_refuses_the_store(tmp_path: Path) -> None:
    """A thread inside a transaction when the process forks leaves the child a copy
    of a connection that cannot be closed safely, and with it SQLite's bookkeeping of
    locks the child does not hold: the child's store refuses every call, writes
    nothing, and says why."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "parent"}])
        inside, leave = threading.Event(), threading.Event()

        def reader() -> None:
            db = store.backend._connect()  # type: ignore[attr-defined]
            db.execute("BEGIN")
            db.execute("SELECT count(*) FROM sessions").fetchone()
            inside.set()
            leave.wait()
            db.execute("COMMIT")

        thread = threading.Thread(target=reader)
        thread.start()
        inside.wait()

        def child() -> int:
            for call in (
                session.history,
                lambda: session.append([{"role": "user", "content": "child"}]),
            ):
                try:
                    call()
                    return 2
                except memvault.ConfigurationError as exc:
                    if "fork" not in str(exc) or "transaction" not in str(exc):
                        return 3
            return 0

        try:
            assert run_in_child(child) == 0
        finally:
            leave.set()
            thread.join()
        assert [m.content for m in session.history()] == ["parent"]


def test_threads_of_one_process_queue_for_the_write_lock(tmp_path: Path) -> None:
    """8 threads, over two stores opened on one file, append 200 turns each; the
    stores' busy_timeout (0.5 s) is about a thousand appends: none fails, nothing is
    lost. Failing: each writer waited for SQLite's write lock in SQLite's busy
    handler, which sleeps (1 ms, 2 ms, ... then 100 ms at a time) and looks again,
    while other threads take the lock in between: one that keeps finding it taken
    gives up after busy_timeout with "database is locked" (1-4 of the 1,600 appends
    in each of 5 runs; the slowest append took 0.50 s while the median took 0.5 ms)."""
    url = f"sqlite:///{tmp_path / 'q.db'}?busy_timeout=0.5"
    with memvault.open(url) as one, memvault.open(url) as other:
        errors: list[str] = []

        def append_turns(writer: tuple[memvault.Store, str]) -> None:
            store, name = writer
            session = store.session(name)
            for i in range(200):
                try:
                    session.append([{"role": "user", "content": f"{name} {i}"}])
                except memvault.BackendUnavailableError as exc:
                    errors.append(f"{name} {i}: {exc}")

        in_threads(append_turns, [(store, f"w{k}") for k, store in enumerate([one, other] * 4)])
        assert not errors, f"{len(errors)} appends failed: {errors[:3]}"
        assert [len(one.session(f"w{k}").history()) for k in range(8)] == [200] * 8


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_has_a_write_gate_of_its_own(tmp_path: Path) -> None:
    """The process's write gate of a file is held by a thread of the parent at the
    fork (as between taking it and BEGIN): the child's writes do not wait for it.
    Failing: the child's copy of the gate stays taken (no thread of the child will
    give it back), and every write of the child fails after busy_timeout."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}?busy_timeout=2") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "parent"}])
        gate = store.backend._gate  # type: ignore[attr-defined]
        gate.enter(0)
        try:

            def child() -> int:
                session.append([{"role": "user", "content": "child"}])
                return 0

            assert run_in_child(child) == 0
        finally:
            gate.leave()
        assert [m.content for m in session.history()] == ["parent", "child"]
