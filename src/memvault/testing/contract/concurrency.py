"""Concurrent writers in threads and processes (invariants 1 and 3)."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from memvault.checks.lostwrites import check_concurrent_appends
from memvault.messages import Message
from memvault.testing import workers
from memvault.testing.contract.base import ContractBase, turn

T = TypeVar("T")


def check_interleaving(history: list[Message], writers: list[str], turns: int) -> None:
    """Nothing lost, duplicated, reordered or split: each writer's turns complete,
    each turn's two messages adjacent, each writer's turns in its own order."""
    ids = [m.id for m in history]
    assert len(ids) == len(set(ids)), "duplicated messages"
    expected = 2 * turns * len(writers)
    assert len(ids) == expected, f"expected {expected} messages, got {len(ids)}"
    for k in range(0, len(ids), 2):
        q, a = ids[k], ids[k + 1]
        assert q.endswith("-q") and a == q[:-2] + "-a", f"turn split at {k}: {q}, {a}"
    for w in writers:
        mine = [i for i in ids if i.startswith(f"{w}-") and i.endswith("-q")]
        assert mine == [f"{w}-{i}-q" for i in range(turns)], f"{w}'s turns lost or reordered"


def in_threads(run: Callable[[T], None], args: list[T]) -> None:
    """``run(arg)`` for each of ``args``, each on a thread of its own, all at once;
    fails with what any of them raised."""
    errors: list[BaseException] = []

    def guarded(arg: T) -> None:
        try:
            run(arg)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(arg,)) for arg in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


class ConcurrencyContract(ContractBase):
    def test_threads_appending_lose_nothing(self, store: Any) -> None:
        """8 threads x 40 turns on one store handle: every turn once, whole, in each
        writer's order. Failing: appends are read-modify-write or not serialized."""
        s = store.session("shared")
        writers = [f"t{i}" for i in range(8)]

        def run(w: str) -> None:
            for i in range(40):
                s.append(turn(w, i))

        in_threads(run, writers)
        check_interleaving(s.history(), writers, 40)
        assert s.info().version == 8 * 40

    def test_threads_popping_pop_each_message_once(self, store: Any) -> None:
        """4 threads pop one session of 60 messages until it is empty: each message
        is returned by exactly one pop, each pop is one version, and a pop returns
        None only once the session is empty. Failing: a pop that checks its message
        before popping it popped another one than it checked (or the same one twice),
        or gave up, when a concurrent pop came between.
        """
        s = store.session("shared")
        sent = [Message.user(f"m{i}", id=f"m{i}") for i in range(60)]
        s.append(sent)
        popped: list[list[str]] = [[] for _ in range(4)]

        def run(mine: list[str]) -> None:
            while (message := s.pop()) is not None:
                mine.append(message.id)
            info = s.info()  # None only once the session is empty (it stays so)
            assert info is not None and info.length == 0, info

        in_threads(run, popped)
        assert sorted(i for mine in popped for i in mine) == sorted(m.id for m in sent)
        for mine in popped:  # each thread saw the session shrink from the newest
            assert mine == sorted(mine, key=lambda i: -int(i[1:]))
        assert (s.info().version, s.info().length) == (61, 0)

    def test_processes_appending_lose_nothing(self, store: Any, opener: Any) -> None:
        """4 processes x 250 appends of 2-message turns to one session: nothing lost,
        duplicated, reordered or split. Failing: the backend's lock or transaction
        does not serialize writers across processes (the read-modify-write bug)."""
        self.require("multiprocess")
        writers = [f"p{i}" for i in range(4)]
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(len(writers), mp_context=ctx) as pool:
            futures = [pool.submit(workers.append_turns, opener, "shared", w, 250) for w in writers]
            versions = [f.result() for f in futures]
        assert max(versions) == 1000
        s = store.session("shared")
        check_interleaving(s.history(), writers, 250)
        log = s.log()
        assert len(log) == 1000 and sorted({e.writer for e in log}) == writers
        assert [e.version for e in log] == list(range(1, 1001))

    def test_rollback_across_processes_keeps_snapshots(self, store: Any, opener: Any) -> None:
        """A appends and snapshots, exits; B appends bad turns and rolls back; C sees
        every snapshot intact and the history equal to the snapshot's; a second
        rollback still works. Failing: the bug where rollback wiped the checkpoints."""
        self.require("multiprocess")
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            pool.submit(workers.checkpoint_then_exit, opener, "conv").result()
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            saved = pool.submit(workers.bad_turns_then_rollback, opener, "conv").result()
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            seen = pool.submit(workers.observe, opener, "conv").result()
        good = [m.id for m in turn("good", 0) + turn("good", 1)]
        assert seen["history"] == good
        assert seen["snapshots"] == [("after-0", 2, 1), ("after-1", 4, 2), (saved, 6, 3)]
        assert seen["ops"] == [
            ("append", "A"),
            ("snapshot", "A"),
            ("append", "A"),
            ("snapshot", "A"),
            ("append", "B"),
            ("rollback", "B"),
        ]
        s = store.session("conv")
        s.rollback("after-0")
        assert [m.id for m in s.history()] == good[:2]
        s.rollback(saved)
        assert len(s.history()) == 6
        names = [x.name for x in s.snapshots()]
        assert names == [
            "after-0",
            "after-1",
            saved,
            "auto:pre-rollback@v4",
            "auto:pre-rollback@v5",
        ]

    def test_lost_write_checker_finds_nothing(self, opener: Any, tmp_path: Path) -> None:
        """4 writer processes x 40 appends while 2 reader processes read: the
        lost-write checker finds no lost, duplicated, reordered, torn or corrupted
        turn and every read was a prefix of the final history. Failing: see the
        report's samples and the kept history file; a non-prefix read means a reader
        saw a state no serial order of the appends produces."""
        self.require("multiprocess")
        report = check_concurrent_appends(
            opener, writers=4, readers=2, appends=40, history_file=tmp_path / "history.jsonl"
        )
        assert report.ok, report.summary()
        assert report.outcomes == {"ok": 160, "failed": 0, "unknown": 0}, report.summary()
        assert report.messages == 320 and report.reads > 0, report.summary()
