"""A SQLite store used from threads that come and go (LangGraph's executor makes new
ones at every invoke) keeps no connection of a thread that has ended."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import memvault


def open_files(path: Path) -> int:
    """This process's open files that are the database or its -wal / -shm."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir()
               if os.path.realpath(fd).startswith(str(path.resolve())))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_threads_connection_is_closed_when_the_thread_ends(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with memvault.open(f"sqlite:///{path}") as store:
        session = store.session("s")
        session.append([{"role": "user", "content": "from the main thread"}])
        before = open_files(path)
        for n in range(20):
            worker = threading.Thread(target=session.append,
                                      args=([{"role": "user", "content": f"thread {n}"}],))
            worker.start()
            worker.join()
        assert open_files(path) <= before + 1
        assert [m.content for m in session.history()][-1] == "thread 19"
        # a thread still running keeps its connection, and the store still closes it
        started, done = threading.Event(), threading.Event()

        def hold() -> None:
            session.info()
            started.set()
            done.wait()
        holder = threading.Thread(target=hold)
        holder.start()
        started.wait()
        assert open_files(path) > before
    assert open_files(path) == 0
    done.set()
    holder.join()
