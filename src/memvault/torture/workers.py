"""The worker processes of ``memvault torture``.

Each worker *incarnation* (a process; a killed one is replaced by a new
incarnation with a new number) writes its own part of the history file, one JSON
line per record, flushed as it goes, so a SIGKILL leaves everything logged before
it. A call is logged before it is made and again when it returns; a call with no
second record was cut short by a kill, and counts as ``unknown``.

Appends use the lost-write checker's records (``invoke`` then ``ok``/``failed``/
``unknown``, with writer ``w``, turn ``t`` and the batch ``ids``) plus the session
index ``s`` and the attempt ``a``; the batches are
:func:`memvault.checks.lostwrites.make_turn` turns (unique ids, checksummed
content). Other writes are ``call`` then ``done`` (``k`` = kind, ``n`` = call
number); reads are one ``view`` record (``ids`` seen, ``bad`` = checksum failures)
or a ``read_error``.

Shared state is lock-free on purpose: a process killed while holding a
``multiprocessing`` lock would leave it held forever, so the stop flag and the
counters are raw shared memory, each counter written by one process at a time.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.checks.faults import FaultInjector, inject_faults
from memvault.checks.lostwrites import APPEND_NOT_APPLIED, checksum, make_turn
from memvault.checks.opener import Opener
from memvault.errors import (
    BackendUnavailableError,
    CorruptRecordError,
    MemvaultError,
    SnapshotExistsError,
    SnapshotNotFoundError,
)
from memvault.messages import Message

KINDS = ("append", "read", "snapshot", "pop", "rollback")
WEIGHTS = (50, 20, 10, 12, 8)
# The backend operation each kind of call makes (where an injected fault lands).
BACKEND_OP = {
    "append": "append",
    "read": "history",
    "snapshot": "snapshot",
    "pop": "pop",
    "rollback": "rollback",
}
APPEND_ATTEMPTS = 3  # an append that failed or whose outcome is unknown is retried as is
# Errors after which a write is known not to have been applied.
WRITE_NOT_APPLIED = (*APPEND_NOT_APPLIED, SnapshotExistsError, SnapshotNotFoundError)


@dataclass(frozen=True)
class Assignment:
    """What every worker is given (picklable).

    Attributes:
        opener: opens the store under test.
        run: the run's id; part of every message id.
        sessions: the shared session ids.
        folder: where each incarnation writes ``<incarnation>.jsonl``.
        fault_rate: the chance that a call gets an injected fault.
        seed: the run's seed (each incarnation derives its own).
    """

    opener: Opener
    run: str
    sessions: tuple[str, ...]
    folder: str
    fault_rate: float
    seed: int


def wire(m: Message) -> dict[str, Any]:
    """A message as the history file records it (the lost-write checker's form)."""
    return {"id": m.id, "role": m.role, "content": m.content, "sum": m.metadata.get("sum")}


def error_fields(exc: BaseException) -> dict[str, Any]:
    """How an error is logged; ``foreign`` marks one that is not a MemvaultError."""
    return {
        "error": f"{type(exc).__name__}: {exc}"[:300],
        "foreign": not isinstance(exc, MemvaultError),
    }


class _Worker:
    def __init__(self, assignment: Assignment, worker: int, slot: int, counters: Any) -> None:
        self.assignment, self.w, self.slot, self.counters = assignment, worker, slot, counters
        self.rng = random.Random(f"{assignment.seed}:{worker}")
        self.file = (Path(assignment.folder) / f"{worker}.jsonl").open("a", encoding="utf-8")
        self.faults: FaultInjector | None = None

    def log(self, **record: Any) -> None:
        self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.file.flush()

    def count(self, fault: bool) -> None:
        self.counters[2 * self.slot] += 1
        if fault:
            self.counters[2 * self.slot + 1] += 1

    def maybe_fault(self, kind: str) -> str | None:
        """Plan a fault for the next call of ``kind``'s backend operation, sometimes."""
        if self.faults is None or self.rng.random() >= self.assignment.fault_rate:
            return None
        when = self.rng.choice(("before", "after"))
        self.faults.fail(BACKEND_OP[kind], when=when)  # type: ignore[arg-type]
        return when

    def timed(self, call: Callable[[], Any]) -> tuple[Any, float]:
        start = time.perf_counter()
        result = call()
        return result, round((time.perf_counter() - start) * 1000, 3)


def _append(wk: _Worker, s: Any, si: int, turn: int) -> None:
    batch = make_turn(wk.assignment.run, wk.w, turn, wk.rng.randint(1, 3))
    for attempt in range(1, APPEND_ATTEMPTS + 1):
        fault = wk.maybe_fault("append") if attempt == 1 else None
        wk.count(fault is not None)
        wk.log(e="invoke", w=wk.w, t=turn, s=si, a=attempt, ids=[m.id for m in batch], fault=fault)
        try:
            version, ms = wk.timed(lambda: s.append(batch))
        except APPEND_NOT_APPLIED as exc:
            wk.log(e="failed", w=wk.w, t=turn, s=si, a=attempt, **error_fields(exc))
            if not isinstance(exc, BackendUnavailableError):
                return
        except Exception as exc:  # OutcomeUnknownError, BackendError, a bug: may have applied
            wk.log(e="unknown", w=wk.w, t=turn, s=si, a=attempt, **error_fields(exc))
        else:
            wk.log(e="ok", w=wk.w, t=turn, s=si, a=attempt, version=version, ms=ms)
            return


def _read(wk: _Worker, s: Any, si: int) -> None:
    fault = wk.maybe_fault("read")
    wk.count(fault is not None)
    try:
        history, ms = wk.timed(s.history)
    except Exception as exc:
        wk.log(
            e="read_error",
            w=wk.w,
            s=si,
            fault=fault,
            corrupt=isinstance(exc, CorruptRecordError),
            **error_fields(exc),
        )
    else:
        bad = [m.id for m in history if m.metadata.get("sum") != checksum(m.role, m.content)]
        wk.log(e="view", w=wk.w, s=si, ids=[m.id for m in history], bad=bad, ms=ms, fault=fault)


def _snapshot_fields(snap: Any) -> dict[str, Any]:
    return {
        "name": snap.name,
        "head": snap.head,
        "base": snap.base,
        "version": snap.version,
        "length": snap.length,
    }


def _write(wk: _Worker, s: Any, si: int, kind: str, n: int) -> None:
    """One pop, snapshot or rollback, logged before and after."""
    arg = f"w{wk.w}.n{n}" if kind == "snapshot" else None
    if kind == "rollback":
        try:
            names = [x.name for x in s.snapshots()]
        except Exception as exc:
            return wk.log(e="read_error", w=wk.w, s=si, corrupt=False, **error_fields(exc))
        if not names:
            return _read(wk, s, si)
        arg = wk.rng.choice(names)
    calls: dict[str, Callable[[], Any]] = {
        "pop": s.pop,
        "snapshot": lambda: s.snapshot(arg),
        "rollback": lambda: s.rollback(arg),
    }
    fault = wk.maybe_fault(kind)
    wk.count(fault is not None)
    wk.log(e="call", w=wk.w, n=n, k=kind, s=si, arg=arg, fault=fault)
    try:
        result, ms = wk.timed(calls[kind])
    except WRITE_NOT_APPLIED as exc:
        wk.log(e="done", w=wk.w, n=n, k=kind, s=si, outcome="failed", **error_fields(exc))
    except Exception as exc:
        wk.log(e="done", w=wk.w, n=n, k=kind, s=si, outcome="unknown", **error_fields(exc))
    else:
        if kind == "pop":
            out = {"message": None if result is None else wire(result)}
        else:
            out = _snapshot_fields(result)
        wk.log(e="done", w=wk.w, n=n, k=kind, s=si, outcome="ok", ms=ms, **out)


def work(
    assignment: Assignment, role: str, worker: int, slot: int, stop: Any, counters: Any
) -> None:
    """A worker process: ``role`` is ``"writer"`` or ``"reader"``; runs until ``stop``.

    ``counters`` holds two integers per slot: calls made, faults injected.
    """
    wk = _Worker(assignment, worker, slot, counters)
    wk.log(e="start", w=worker, role=role, slot=slot, pid=os.getpid(), at=time.time())
    try:
        store = assignment.opener(writer=f"torture-w{worker}")
    except MemvaultError as exc:  # the server is down: the runner starts a new worker
        wk.log(e="open_error", w=worker, at=time.time(), **error_fields(exc))
        raise SystemExit(1) from None
    try:
        if assignment.fault_rate > 0:
            wk.faults = inject_faults(store)
        sessions = [store.session(sid) for sid in assignment.sessions]  # after injection
        turn = n = 0
        while not stop.value:
            si = wk.rng.randrange(len(sessions))
            kind = "read" if role == "reader" else wk.rng.choices(KINDS, WEIGHTS)[0]
            if kind == "append":
                turn += 1
                _append(wk, sessions[si], si, turn)
            elif kind == "read":
                _read(wk, sessions[si], si)
                if role == "reader":
                    time.sleep(wk.rng.uniform(0, 0.01))  # leave the writers some CPU
            else:
                n += 1
                _write(wk, sessions[si], si, kind, n)
        wk.log(e="stop", w=worker, at=time.time())
    finally:
        store.close()
        wk.file.close()
