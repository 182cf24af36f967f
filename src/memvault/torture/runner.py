"""Run a torture: start the workers, kill and restart them, then record the final state.

The parent process never touches the store while the workers run. Kills are a
Poisson process (``kill_rate`` per second on average): each picks a worker at
random, writer or reader, sends SIGKILL and starts a new incarnation in its place.
At the end the workers are asked to stop; one that does not within ``grace``
seconds is killed too (a *late* kill). Then a fresh handle reads every session's
info, history, snapshots and log, each snapshot's own history through a
throwaway fork, and the history before each pop, trim and clear (through
``history(at_version=N)``), and appends all of it to the history file for the audit.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.checks.opener import Opener
from memvault.errors import ConfigurationError, CorruptRecordError
from memvault.torture.workers import Assignment, error_fields, wire, work
from memvault.urls import redact


@dataclass(frozen=True)
class TortureSettings:
    """The knobs of a torture run (see ``memvault torture --help``)."""

    writers: int = 4
    readers: int = 2
    seconds: float = 30.0
    kill_rate: float = 1.0
    sessions: int = 3
    fault_rate: float = 0.02
    seed: int | None = None
    history: str | None = None
    grace: float = 60.0

    def check(self) -> None:
        if self.writers < 1 or self.readers < 0 or self.sessions < 1:
            raise ConfigurationError("torture needs writers >= 1, readers >= 0, sessions >= 1")
        if self.seconds <= 0 or self.kill_rate < 0 or not 0 <= self.fault_rate <= 1:
            raise ConfigurationError("torture needs seconds > 0, kill_rate >= 0, "
                                     "0 <= fault_rate <= 1")


@dataclass
class Status:
    """What the progress display shows; updated several times a second."""

    phase: str = "starting"
    elapsed: float = 0.0
    calls: int = 0
    faults: int = 0
    kills: int = 0


Progress = Callable[[Status], None]


class _Fleet:
    """The worker processes, one per slot, each slot refilled after a kill."""

    def __init__(self, assignment: Assignment, settings: TortureSettings,
                 log: Callable[..., None]) -> None:
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(["memvault.torture.workers"])
        self.assignment, self.log = assignment, log
        self.roles = ["writer"] * settings.writers + ["reader"] * settings.readers
        self.stop = self.ctx.RawValue("b", 0)
        self.counters = self.ctx.RawArray("q", 2 * len(self.roles))
        self.procs: list[Any] = [None] * len(self.roles)
        self.incarnation = [0] * len(self.roles)
        self.next_worker = 0

    def start(self, slot: int) -> None:
        worker, self.next_worker = self.next_worker, self.next_worker + 1
        self.incarnation[slot] = worker
        proc = self.ctx.Process(target=work, daemon=True, args=(
            self.assignment, self.roles[slot], worker, slot, self.stop, self.counters))
        proc.start()
        self.procs[slot] = proc

    def kill(self, slot: int, late: bool = False) -> None:
        proc = self.procs[slot]
        proc.kill()
        proc.join()
        self.log(e="kill", w=self.incarnation[slot], slot=slot, late=late, at=time.time())

    def reap(self) -> None:
        """Restart workers that died on their own (an error opening the store, a bug)."""
        for slot, proc in enumerate(self.procs):
            if not proc.is_alive():
                proc.join()
                self.log(e="exit", w=self.incarnation[slot], code=proc.exitcode, at=time.time())
                self.start(slot)

    def totals(self) -> tuple[int, int]:
        values = list(self.counters)
        return sum(values[0::2]), sum(values[1::2])


def _check_shared(opener: Opener) -> None:
    if opener.factory is None and opener.async_factory is None \
            and opener.url.lower().startswith("memory:"):
        raise ConfigurationError(
            "memory:// is private to each process: torture needs a store that several "
            "processes share (sqlite://, redis://, postgresql://)")


def _hammer(fleet: _Fleet, settings: TortureSettings, rng: random.Random, status: Status,
            progress: Progress | None) -> None:
    started = time.monotonic()
    deadline = started + settings.seconds
    next_kill = started + rng.expovariate(settings.kill_rate) if settings.kill_rate else deadline
    for slot in range(len(fleet.roles)):
        fleet.start(slot)
    status.phase = "running"
    while (now := time.monotonic()) < deadline:
        if now >= next_kill:
            slot = rng.randrange(len(fleet.roles))
            fleet.kill(slot)
            fleet.start(slot)
            status.kills += 1
            next_kill = now + rng.expovariate(settings.kill_rate)
        else:
            fleet.reap()
            time.sleep(min(0.1, max(0.0, min(next_kill, deadline) - now)))
        status.elapsed = now - started
        status.calls, status.faults = fleet.totals()
        if progress:
            progress(status)
    status.phase = "stopping"
    if progress:
        progress(status)
    fleet.stop.value = 1
    for slot, proc in enumerate(fleet.procs):
        proc.join(max(0.1, settings.grace - (time.monotonic() - deadline)))
        if proc.is_alive():
            fleet.kill(slot, late=True)
        elif proc.exitcode:
            fleet.log(e="exit", w=fleet.incarnation[slot], code=proc.exitcode, at=time.time())
    status.elapsed = time.monotonic() - started
    status.calls, status.faults = fleet.totals()


def _snapshot_record(store: Any, s: Any, snap: Any, scratch: str) -> dict[str, Any]:
    record = {"name": snap.name, "head": snap.head, "base": snap.base,
              "version": snap.version, "length": snap.length, "auto": snap.auto}
    try:
        fork = s.fork(scratch, at=snap.name)
        try:
            record["messages"] = [wire(m) for m in fork.history()]
        finally:
            store.session(scratch).delete()
    except Exception as exc:
        record.update(error_fields(exc), corrupt=isinstance(exc, CorruptRecordError))
    return record


# Operations that hide messages without a snapshot holding them (a rollback saves the
# state it replaces as a snapshot, whose history is read anyway).
_HIDING = ("pop", "trim", "clear")


def _past_record(s: Any, version: int) -> dict[str, Any]:
    """The history right after ``version``, read back through ``history(at_version=)``."""
    record: dict[str, Any] = {"version": version}
    try:
        record["messages"] = [wire(m) for m in s.history(at_version=version)]
    except Exception as exc:
        record.update(error_fields(exc), corrupt=isinstance(exc, CorruptRecordError))
    return record


def _final_state(opener: Opener, sessions: tuple[str, ...], status: Status,
                 progress: Progress | None) -> list[dict[str, Any]]:
    """Everything a user can read about each session, each snapshot's history, and the
    history as it was before each pop, trim and clear (what they hid)."""
    records: list[dict[str, Any]] = []
    store = opener(writer="torture-verifier")
    try:
        for si, sid in enumerate(sessions):
            status.phase = f"verifying session {si + 1}/{len(sessions)}"
            if progress:
                progress(status)
            s = store.session(sid)
            try:
                info = s.info()
                history = [wire(m) for m in s.history()]
                snaps, events = s.snapshots(), s.log()
            except Exception as exc:
                corrupt = isinstance(exc, CorruptRecordError)
                records.append({"e": "final_error", "s": si, "corrupt": corrupt,
                                **error_fields(exc)})
                continue
            records.append({
                "e": "state", "s": si,
                "info": None if info is None else {"version": info.version, "length": info.length},
                "history": history,
                "events": [{"version": e.version, "op": e.op, "writer": e.writer,
                            "head": [e.head_before, e.head_after],
                            "base": [e.base_before, e.base_after], "detail": e.detail}
                           for e in events],
                "snapshots": [_snapshot_record(store, s, snap, f"{sid}~verify~{k}")
                              for k, snap in enumerate(snaps)],
                "past": [_past_record(s, v) for v in
                         sorted({e.version - 1 for e in events if e.op in _HIDING})],
            })
    finally:
        store.close()
    return records


def prepare(store: str | Opener, settings: TortureSettings) -> Opener:
    """Check the settings and the store (open it once: a bad URL fails here, and the
    schema is created before the workers race to), and return its opener."""
    settings.check()
    opener = store if isinstance(store, Opener) else Opener(store)
    _check_shared(opener)
    opener(writer="torture-verifier").close()
    return opener


def run_torture(store: str | Opener, settings: TortureSettings | None = None,
                progress: Progress | None = None) -> Path:
    """Torture a store and return the history file (audit it with
    :func:`memvault.torture.audit.audit_history`).

    Args:
        store: a store URL, or an :class:`~memvault.testing.Opener` (for options,
            the async face, or a backend given by a factory).
        settings: the run's knobs.
        progress: called with the :class:`Status` several times a second.
    """
    settings = settings or TortureSettings()
    opener = prepare(store, settings)
    seed = settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**31)
    run = uuid.uuid4().hex[:10]
    sessions = tuple(f"torture-{run}-{i}" for i in range(settings.sessions))
    folder = Path(settings.history or tempfile.mkdtemp(prefix="memvault-torture-"))
    parts = folder / f"parts-{run}"
    parts.mkdir(parents=True)
    assignment = Assignment(opener, run, sessions, str(parts), settings.fault_rate, seed)
    parent = (parts / "parent.jsonl").open("a", encoding="utf-8")

    def log(**record: Any) -> None:
        parent.write(json.dumps(record, ensure_ascii=False) + "\n")
        parent.flush()

    status = Status()
    try:
        _hammer(_Fleet(assignment, settings, log), settings, random.Random(seed), status, progress)
        state = _final_state(opener, sessions, status, progress)
    finally:
        parent.close()
    header = {"e": "run", "run": run, "url": redact(opener.url), "face": opener.face,
              "sessions": list(sessions), "writers": settings.writers,
              "readers": settings.readers, "seconds": round(status.elapsed, 3),
              "kill_rate": settings.kill_rate, "fault_rate": settings.fault_rate, "seed": seed}
    path = folder / f"torture-{run}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for part in sorted(parts.glob("*.jsonl")):
            out.write(_whole_lines(part.read_text(encoding="utf-8")))
            part.unlink()
        for record in state:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    parts.rmdir()
    return path


def _whole_lines(text: str) -> str:
    """A part without the line its writer was killed in the middle of, if any."""
    return text if text.endswith("\n") or not text else text[: text.rfind("\n") + 1]


def cleanup(store: str | Opener, sessions: list[str]) -> None:
    """Delete a run's sessions (physically) from the store."""
    opener = store if isinstance(store, Opener) else Opener(store)
    handle = opener(writer="torture-verifier")
    try:
        for sid in sessions:
            handle.session(sid).delete()
    finally:
        handle.close()
