"""Run a torture: start the workers, kill and restart them, then record the final state.

The parent process never touches the store while the workers run. Kills are a
Poisson process (``kill_rate`` per second on average): each picks a worker at
random, writer or reader, sends SIGKILL and starts a new incarnation in its place.
Given a private server it started (:mod:`memvault.torture.servers`), the runner also
strikes the server, ``server_fault_rate`` times a second on average: a SIGKILL and a
restart on the same files (``kill``), or an outage of the cutting proxy the workers
then reach it through (``proxy``, :mod:`memvault.torture.proxy`), which also cuts
``cut_rate`` of the requests and replies. At the end the workers are asked to stop;
one that does not within ``grace`` seconds is killed too (a *late* kill). Then a
fresh handle reads every session's info, history, snapshots and log, each
snapshot's own history through a throwaway fork, and the history before each pop,
trim and clear (through
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memvault.checks.opener import Opener
from memvault.errors import ConfigurationError, CorruptRecordError
from memvault.torture.proxy import CuttingProxy
from memvault.torture.servers import PrivateServer
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
    server_faults: tuple[str, ...] = ()
    server_fault_rate: float = 0.2
    cut_rate: float = 0.002

    def check(self) -> None:
        if self.writers < 1 or self.readers < 0 or self.sessions < 1:
            raise ConfigurationError("torture needs writers >= 1, readers >= 0, sessions >= 1")
        if self.seconds <= 0 or self.kill_rate < 0 or not 0 <= self.fault_rate <= 1:
            raise ConfigurationError(
                "torture needs seconds > 0, kill_rate >= 0, 0 <= fault_rate <= 1"
            )
        if not set(self.server_faults) <= set(SERVER_FAULTS):
            raise ConfigurationError(
                f"server faults are {' and '.join(SERVER_FAULTS)}, not "
                f"{', '.join(self.server_faults)}"
            )
        if self.server_fault_rate < 0 or not 0 <= self.cut_rate <= 1:
            raise ConfigurationError("torture needs server_fault_rate >= 0, 0 <= cut_rate <= 1")


SERVER_FAULTS = ("kill", "proxy")


@dataclass
class Status:
    """What the progress display shows; updated several times a second."""

    phase: str = "starting"
    elapsed: float = 0.0
    calls: int = 0
    faults: int = 0
    kills: int = 0
    server_faults: int = 0


Progress = Callable[[Status], None]


class _Fleet:
    """The worker processes, one per slot, each slot refilled after a kill."""

    def __init__(
        self, assignment: Assignment, settings: TortureSettings, log: Callable[..., None]
    ) -> None:
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
        proc = self.ctx.Process(
            target=work,
            daemon=True,
            args=(self.assignment, self.roles[slot], worker, slot, self.stop, self.counters),
        )
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

    def close(self) -> None:
        """Stop every worker (after Ctrl-C or an error, none may outlive the run). The
        flag also stops one whose start was interrupted: multiprocessing never learnt
        of it, so only the flag reaches it."""
        self.stop.value = 1
        for proc in self.procs:
            if proc is not None and proc.is_alive():
                proc.kill()
                proc.join()

    def totals(self) -> tuple[int, int]:
        values = list(self.counters)
        return sum(values[0::2]), sum(values[1::2])


def _check_shared(opener: Opener) -> None:
    if (
        opener.factory is None
        and opener.async_factory is None
        and opener.url.lower().startswith("memory:")
    ):
        raise ConfigurationError(
            "memory:// is private to each process: torture needs a store that several "
            "processes share (sqlite://, redis://, postgresql://)"
        )


class _Strikes:
    """The server faults: SIGKILL and restart the server, or an outage of the proxy."""

    def __init__(
        self,
        server: PrivateServer | None,
        proxy: CuttingProxy | None,
        settings: TortureSettings,
        rng: random.Random,
        log: Callable[..., None],
    ) -> None:
        self.server, self.proxy, self.rng, self.log = server, proxy, rng, log
        self.kinds = settings.server_faults
        self.rate = settings.server_fault_rate if self.kinds else 0.0

    def after(self, now: float) -> float:
        """When the next strike is due."""
        return now + self.rng.expovariate(self.rate) if self.rate else float("inf")

    def strike(self) -> None:
        kind, at = self.rng.choice(self.kinds), time.time()
        if kind == "kill":
            assert self.server is not None
            self.server.crash(self.rng)
            self.log(
                e="server_kill", server=self.server.kind, at=at, down=round(time.time() - at, 3)
            )
        else:
            assert self.proxy is not None
            self.proxy.outage(self.rng.uniform(0.05, 0.5))
            self.log(e="outage", at=at, down=round(time.time() - at, 3))


def _hammer(
    fleet: _Fleet,
    strikes: _Strikes,
    settings: TortureSettings,
    rng: random.Random,
    status: Status,
    progress: Progress | None,
) -> None:
    for slot in range(len(fleet.roles)):  # before the clock: slow starts under load
        fleet.start(slot)  # must not eat the run's seconds
    started = time.monotonic()
    deadline = started + settings.seconds
    next_kill = started + rng.expovariate(settings.kill_rate) if settings.kill_rate else deadline
    next_strike = strikes.after(started)
    status.phase = "running"
    while (now := time.monotonic()) < deadline:
        if now >= next_strike:
            strikes.strike()
            status.server_faults += 1
            next_strike = strikes.after(time.monotonic())
        elif now >= next_kill:
            slot = rng.randrange(len(fleet.roles))
            fleet.kill(slot)
            fleet.start(slot)
            status.kills += 1
            next_kill = now + rng.expovariate(settings.kill_rate)
        else:
            fleet.reap()
            time.sleep(min(0.1, max(0.0, min(next_kill, next_strike, deadline) - now)))
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
    record = {
        "name": snap.name,
        "head": snap.head,
        "base": snap.base,
        "version": snap.version,
        "length": snap.length,
        "auto": snap.auto,
    }
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


def _final_state(
    opener: Opener, sessions: tuple[str, ...], status: Status, progress: Progress | None
) -> list[dict[str, Any]]:
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
                records.append(
                    {"e": "final_error", "s": si, "corrupt": corrupt, **error_fields(exc)}
                )
                continue
            records.append(
                {
                    "e": "state",
                    "s": si,
                    "info": None
                    if info is None
                    else {"version": info.version, "length": info.length},
                    "history": history,
                    "events": [
                        {
                            "version": e.version,
                            "op": e.op,
                            "writer": e.writer,
                            "head": [e.head_before, e.head_after],
                            "base": [e.base_before, e.base_after],
                            "detail": e.detail,
                        }
                        for e in events
                    ],
                    "snapshots": [
                        _snapshot_record(store, s, snap, f"{sid}~verify~{k}")
                        for k, snap in enumerate(snaps)
                    ],
                    "past": [
                        _past_record(s, v)
                        for v in sorted({e.version - 1 for e in events if e.op in _HIDING})
                    ],
                }
            )
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


def _proxied(
    opener: Opener, server: PrivateServer | None, settings: TortureSettings, seed: int
) -> tuple[Opener, CuttingProxy | None]:
    """The opener the workers use: through a cutting proxy for ``proxy`` faults."""
    if settings.server_faults and server is None:
        raise ConfigurationError(
            "server faults need a server the torture started itself "
            "(memvault torture --server redis|postgres|redis-cluster)"
        )
    if "proxy" not in settings.server_faults:
        return opener, None
    assert server is not None
    if server.address is None:
        raise ConfigurationError(
            f"proxy faults need a single server, not {server.kind} "
            f"(its clients connect to every node)"
        )
    proxy = CuttingProxy(server.address, settings.cut_rate, seed)
    host, port = server.address
    url = opener.url.replace(f"{host}:{port}", f"{host}:{proxy.port}", 1)
    return replace(opener, url=url), proxy


def run_torture(
    store: str | Opener,
    settings: TortureSettings | None = None,
    progress: Progress | None = None,
    server: PrivateServer | None = None,
) -> Path:
    """Torture a store and return the history file (audit it with
    :func:`memvault.torture.audit.audit_history`).

    Args:
        store: a store URL, or an :class:`~memvault.testing.Opener` (for options,
            the async face, or a backend given by a factory).
        settings: the run's knobs.
        progress: called with the :class:`Status` several times a second.
        server: the private server ``store`` is on, for ``settings.server_faults``
            (:func:`memvault.torture.servers.start_server`); the caller closes it.
    """
    settings = settings or TortureSettings()
    opener = prepare(store, settings)
    seed = settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**31)
    workers_opener, proxy = _proxied(opener, server, settings, seed)
    run = uuid.uuid4().hex[:10]
    sessions = tuple(f"torture-{run}-{i}" for i in range(settings.sessions))
    folder = Path(settings.history or tempfile.mkdtemp(prefix="memvault-torture-"))
    parts = folder / f"parts-{run}"
    parts.mkdir(parents=True)
    assignment = Assignment(workers_opener, run, sessions, str(parts), settings.fault_rate, seed)
    parent = (parts / "parent.jsonl").open("a", encoding="utf-8")

    def log(**record: Any) -> None:
        parent.write(json.dumps(record, ensure_ascii=False) + "\n")
        parent.flush()

    status, rng = Status(), random.Random(seed)
    fleet = _Fleet(assignment, settings, log)
    try:
        _hammer(fleet, _Strikes(server, proxy, settings, rng, log), settings, rng, status, progress)
        if proxy is not None:
            proxy.close()
            log(e="cuts", **proxy.cuts)
        state = _final_state(opener, sessions, status, progress)
    finally:
        fleet.close()
        if proxy is not None:
            proxy.close()
        parent.close()
    header = {
        "e": "run",
        "run": run,
        "url": redact(opener.url),
        "face": opener.face,
        "sessions": list(sessions),
        "writers": settings.writers,
        "readers": settings.readers,
        "seconds": round(status.elapsed, 3),
        "kill_rate": settings.kill_rate,
        "fault_rate": settings.fault_rate,
        "seed": seed,
        "server": None if server is None else server.kind,
        "server_faults": list(settings.server_faults),
        "server_fault_rate": settings.server_fault_rate,
        "cut_rate": settings.cut_rate,
    }
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
