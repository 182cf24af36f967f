"""A SQLite store used from threads that come and go (LangGraph's executor makes new
ones at every invoke) lends an ended thread's connection to the next new thread, and
keeps no more of them than that."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import memvault


def open_files(path: Path) -> int:
    """This process's open files that are the database or its -wal / -shm."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir()
               if os.path.realpath(fd).startswith(str(path.resolve())))


@contextmanager
def holding(store: memvault.Store, threads: int = 1) -> Iterator[list[sqlite3.Connection]]:
    """``threads`` threads at once, each holding its connection (it has read) until
    the block ends; the block gets their connections."""
    started, done = threading.Barrier(threads + 1), threading.Event()
    held: list[sqlite3.Connection] = []

    def hold() -> None:
        store.session("s").info()
        held.append(store.backend._connect())  # type: ignore[attr-defined]
        started.wait()
        done.wait()
    holders = [threading.Thread(target=hold) for _ in range(threads)]
    for holder in holders:
        holder.start()
    started.wait()
    try:
        yield held
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
            worker = threading.Thread(target=session.append,
                                      args=([{"role": "user", "content": f"thread {n}"}],))
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
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a connection costs ~0.2 ms and its statements compiled again: threads
    that come and go one after the other share one."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "from the main thread"}])
        opened = counting_connects(monkeypatch)
        for n in range(20):
            worker = threading.Thread(target=session.append,
                                      args=([{"role": "user", "content": f"thread {n}"}],))
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
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's idle connections are not lent to a thread of a forked child
    (SQLite's connections must not cross a fork); the child's own threads, one after
    the other, share the one it opens (a worker forked from a server that opened the
    store runs its graphs there)."""
    with memvault.open(f"sqlite:///{tmp_path / 'c.db'}") as store:
        session = store.session("s")
        worker = threading.Thread(target=session.append,
                                  args=([{"role": "user", "content": "parent"}],))
        worker.start()
        worker.join()  # its connection is now idle
        opened = counting_connects(monkeypatch)
        pid = os.fork()
        if pid == 0:  # the child: threads of its own append, on its own connection
            code = 1
            try:
                for n in range(3):
                    child = threading.Thread(target=session.append,
                                             args=([{"role": "user", "content": f"child {n}"}],))
                    child.start()
                    child.join()
                code = 0 if opened == [os.getpid()] else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [m.content for m in session.history()] == [
            "parent", "child 0", "child 1", "child 2"]


@pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/fd").is_dir(),
                    reason="needs fork and /proc")
def test_a_forked_child_leaves_the_parents_connections_open(tmp_path: Path) -> None:
    """In a forked child, the threads that ran in the parent are gone and their locals
    with them: the connections they held are the parent's, and the child must not
    close them (SQLite: a connection must not be used across a fork; closing one
    releases the child's locks on the file and may checkpoint the parent's WAL)."""
    path = tmp_path / "c.db"
    with memvault.open(f"sqlite:///{path}") as store:
        with holding(store) as (held,):
            pid = os.fork()
            if pid == 0:  # the child: the holder thread is not here
                code = 1
                try:
                    import gc
                    gc.collect()
                    try:  # a closed connection refuses even this
                        code = 0 if held.in_transaction is False else 2
                    except sqlite3.ProgrammingError:
                        code = 3
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
