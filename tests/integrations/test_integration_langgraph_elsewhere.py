"""A saver sees every write made elsewhere to a thread it has read, at its next read.

A saver keeps what it read of a thread (its log, decoded values) and what it put.
Each test reads a thread, has something else write to it (another saver in this
thread, another thread, another store on the same file, another process), and
reads again: the second read must show the write. A thread deleted and made again
with the same checkpoint ids (so with the same version as before) and a thread
expiring without any write are the cases a cheap "nothing changed" check is
likeliest to miss.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault.integrations.langgraph import MemvaultSaver
from tests.integrations.test_integration_langgraph_cache import Clock, put, read, texts

PROCESS = r"""
import sys
import memvault
from memvault.integrations.langgraph import MemvaultSaver
from tests.integrations.test_integration_langgraph_elsewhere import write
with memvault.open(sys.argv[1]) as store:
    write(sys.argv[2])(MemvaultSaver(store))
"""


def other_store(url: str) -> Callable[[Callable[[MemvaultSaver], None]], None]:
    def run(write: Callable[[MemvaultSaver], None]) -> None:
        with memvault.open(url) as elsewhere:
            write(MemvaultSaver(elsewhere))

    return run


def other_thread(store: Any) -> Callable[[Callable[[MemvaultSaver], None]], None]:
    def run(write: Callable[[MemvaultSaver], None]) -> None:
        worker = threading.Thread(target=write, args=(MemvaultSaver(store),))
        worker.start()
        worker.join()

    return run


def write(how: str) -> Callable[[MemvaultSaver], None]:
    """ "grow": a child of checkpoint 2; else delete the thread and make it again with
    checkpoints 1 and 2 (the same ids, as many writes) holding messages ``how``1 ..."""

    def grow(saver: MemvaultSaver) -> None:
        put(saver, "t", "3", ["h1", "ai1", "elsewhere"], parent="2")

    def remake(saver: MemvaultSaver) -> None:
        saver.delete_thread("t")
        put(saver, "t", "1", [f"{how}1"])
        put(saver, "t", "2", [f"{how}1", f"ai-{how}"], parent="1")

    return grow if how == "grow" else remake


@contextmanager
def elsewhere(
    where: str, backend: str, tmp_path: Path
) -> Iterator[tuple[Any, Callable[[str], None]]]:
    """The store the reading saver uses, and a way to make a write happen elsewhere."""
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/c.db"
    root = Path(__file__).resolve().parents[2]
    with memvault.open(url) as store:
        ways: dict[str, Callable[[Callable[[MemvaultSaver], None]], None]] = {
            "another saver, same thread": lambda write: write(MemvaultSaver(store)),
            "another thread": other_thread(store),
        }
        if backend == "sqlite":
            ways["another store on the file"] = other_store(url)
        if where == "another process":

            def run(how: str) -> None:
                subprocess.run([sys.executable, "-c", PROCESS, url, how], cwd=root, check=True)

            yield store, run
            return
        if where not in ways:
            pytest.skip(f"{where}: not on {backend}")
        yield store, lambda how: ways[where](write(how))


@pytest.mark.parametrize(
    "where",
    [
        "another saver, same thread",
        "another thread",
        "another store on the file",
        "another process",
    ],
)
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_writes_made_elsewhere_between_two_reads_are_seen(
    where: str, backend: str, tmp_path: Path
) -> None:
    if where == "another process" and backend == "memory":
        pytest.skip("memory:// is per process")
    with elsewhere(where, backend, tmp_path) as (store, write):
        mine = MemvaultSaver(store)
        put(mine, "t", "1", ["h1"])
        put(mine, "t", "2", ["h1", "ai1"], parent="1")
        assert texts(read(mine, "t")) == ["h1", "ai1"]
        write("grow")
        assert texts(read(mine, "t")) == ["h1", "ai1", "elsewhere"]
        # deleted and made again: the same ids and as many writes as before
        write("x")
        assert texts(read(mine, "t", "2")) == ["x1", "ai-x"]
        assert texts(read(mine, "t")) == ["x1", "ai-x"]
        # and again, then a put that needs no parent (its append succeeds, and the
        # thread's version is one more than the saver's log had), then a read
        write("y")
        put(mine, "t", "0", ["mine"])
        assert texts(read(mine, "t", "2")) == ["y1", "ai-y"]
        put(mine, "t", "4", ["y1", "ai-y", "mine"], parent="2")
        assert texts(read(mine, "t")) == ["y1", "ai-y", "mine"]


def test_a_thread_that_expires_without_a_write_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader's store has no ttl; the writer's does: the thread expires between two
    # reads with nothing written to the file.
    clock = Clock()
    monkeypatch.setattr(memvault.store, "time", clock)
    url = f"sqlite:///{tmp_path}/c.db"
    with memvault.open(url) as store, memvault.open(url, ttl=60) as expiring:
        mine, writer = MemvaultSaver(store), MemvaultSaver(expiring)
        put(writer, "t", "1", ["h1"])
        assert texts(read(mine, "t")) == ["h1"]
        assert texts(read(mine, "t")) == ["h1"]
        clock.now += 61
        assert read(mine, "t") is None
        # a saver whose own store has a ttl, on a thread with no expiry: its own
        # writes set one
        put(mine, "t", "1", ["h1"])
        assert texts(read(writer, "t")) == ["h1"]
        put(writer, "t", "2", ["h1", "ai1"], parent="1")
        assert texts(read(writer, "t")) == ["h1", "ai1"]
        clock.now += 61
        assert read(writer, "t") is None
