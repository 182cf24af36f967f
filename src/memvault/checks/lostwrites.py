"""The lost-write checker: concurrent writer and reader processes, then an audit.

:func:`check_concurrent_appends` starts ``writers`` processes that each append
``appends`` turns of ``turn_size`` messages to one session (globally unique ids,
a checksum of each message's content in its metadata) and ``readers`` processes
that read the history while they run. Every call is logged to a JSONL history
file before and after it is made: ``ok`` (acknowledged), ``failed`` (an error
that guarantees nothing was applied: ``BackendUnavailableError``, bad input,
conflicts) or ``unknown`` (``OutcomeUnknownError``, any other error, or a process
that died mid-call). The parent then reads the final history and audits the
file with :func:`analyze_history` (see :class:`~memvault.checks.report.LostWriteReport`
for what each finding means). The file is kept, so a run can be re-checked.

History file format (one JSON object per line, field ``e`` says which; read into the
typed records of :mod:`memvault.checks.history`):
``run`` (parameters), ``invoke``/``ok``/``failed``/``unknown`` (writer ``w``,
turn ``t``, ``ids``), ``read`` (reader ``r``, the ``ids`` it saw, ``bad`` ids whose
checksum failed) or ``read_error``, and ``final`` (the history after the run:
``id``, ``role``, ``content``, ``sum`` per message) or ``final_error``. Other
tools (``memvault torture``) may write the same records and call
:func:`analyze_history`.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memvault.checks.history import parse_all
from memvault.checks.opener import Opener
from memvault.checks.report import LostWriteReport, audit
from memvault.errors import (
    BackendUnavailableError,
    ConflictError,
    CorruptRecordError,
    DuplicateMessageError,
    InvalidMessageError,
)
from memvault.messages import Message, Role
from memvault.urls import redact

# Errors that promise an append was not applied; any other error may hide one that was.
APPEND_NOT_APPLIED = (
    BackendUnavailableError,
    InvalidMessageError,
    ConflictError,
    DuplicateMessageError,
)


def checksum(role: str, content: Any) -> str:
    """The checksum stored in each message's metadata (``sum``)."""
    text = json.dumps([role, content], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def make_turn(run: str, writer: int, turn: int, size: int) -> list[Message]:
    """Turn ``turn`` of writer ``writer``: ids unique across runs, checksummed content."""
    out = []
    for k in range(size):
        role: Role = "user" if k % 2 == 0 else "assistant"
        content = f"w{writer} t{turn} m{k} ✓ é\x00👍 {run}"
        out.append(
            Message(
                id=f"{run}.w{writer}.t{turn}.m{k}",
                role=role,
                content=content,
                metadata={"sum": checksum(role, content)},
            )
        )
    return out


def _bad_ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if m.metadata.get("sum") != checksum(m.role, m.content)]


class _Log:
    """One process's own part of the history file; flushed per line so that a
    killed process leaves everything it logged."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def __call__(self, **record: Any) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_turns(
    opener: Opener,
    session_id: str,
    run: str,
    writer: int,
    appends: int,
    turn_size: int,
    log_path: str,
) -> None:
    """Worker process: append ``appends`` turns, logging every outcome."""
    log = _Log(Path(log_path))
    store = opener(writer=f"writer-{writer}")
    try:
        s = store.session(session_id)
        for t in range(appends):
            batch = make_turn(run, writer, t, turn_size)
            log(e="invoke", w=writer, t=t, ids=[m.id for m in batch], at=time.time())
            try:
                version = s.append(batch)
            except APPEND_NOT_APPLIED as exc:
                log(e="failed", w=writer, t=t, error=repr(exc))
            except Exception as exc:  # OutcomeUnknownError, BackendError, a bug: may have applied
                log(e="unknown", w=writer, t=t, error=repr(exc))
            else:
                log(e="ok", w=writer, t=t, version=version)
    finally:
        store.close()
        log.close()


def read_while(
    opener: Opener, session_id: str, reader: int, log_path: str, stop: Any, max_reads: int
) -> None:
    """Worker process: read the history until ``stop`` is set (at most ``max_reads``)."""
    log = _Log(Path(log_path))
    store = opener(writer=f"reader-{reader}")
    try:
        s = store.session(session_id)
        for _ in range(max_reads):  # at least one read, however late the process starts
            try:
                history = s.history()
            except CorruptRecordError as exc:
                log(e="read_error", r=reader, corrupt=True, error=str(exc))
            except Exception as exc:
                log(e="read_error", r=reader, corrupt=False, error=repr(exc))
            else:
                log(e="read", r=reader, ids=[m.id for m in history], bad=_bad_ids(history))
            if stop.wait(0.02):
                break
    finally:
        store.close()
        log.close()


def _final(opener: Opener, session_id: str) -> dict[str, Any]:
    store = opener(writer="lost-write-checker")
    try:
        history = store.session(session_id).history()
    except CorruptRecordError as exc:
        return {"e": "final_error", "corrupt": True, "error": str(exc)}
    finally:
        store.close()
    return {
        "e": "final",
        "messages": [
            {"id": m.id, "role": m.role, "content": m.content, "sum": m.metadata.get("sum")}
            for m in history
        ],
    }


def check_concurrent_appends(
    store: str | Opener,
    *,
    writers: int = 4,
    readers: int = 2,
    appends: int = 50,
    turn_size: int = 2,
    session_id: str | None = None,
    history_file: str | Path | None = None,
    options: dict[str, Any] | None = None,
    max_reads: int = 200,
    timeout: float = 600.0,
) -> LostWriteReport:
    """Run concurrent writer and reader processes against one session and audit.

    Args:
        store: a store URL, or an :class:`~memvault.testing.Opener` (for a backend
            without a URL, or the async face). Every process opens its own handle.
        writers: writer processes.
        readers: reader processes, reading the history during the run.
        appends: turns each writer appends, one ``append`` call each.
        turn_size: messages per turn (per call).
        session_id: the session to use; default a new unique id, so runs never mix.
        history_file: where to keep the JSONL history; default a new temp file.
        options: options for every open (e.g. ``{"ttl": 60}``).
        max_reads: reads per reader at most.
        timeout: seconds to wait for the writers before they are killed (their
            unfinished calls count as ``unknown``).

    Returns:
        The audit; ``report.ok`` is False on any violation. JSON-serializable
        through ``report.to_dict()``.
    """
    if min(writers, appends, turn_size) < 1 or readers < 0:
        raise ValueError("writers, appends and turn_size must be >= 1, readers >= 0")
    opener = store if isinstance(store, Opener) else Opener(store)
    if (
        opener.factory is None
        and opener.async_factory is None
        and opener.url.lower().startswith("memory:")
    ):
        raise ValueError(
            "memory:// is private to one process: the checker needs a store "
            "that several processes share"
        )
    if options:
        opener = Opener(
            opener.url,
            opener.face,
            {**opener.options, **options},
            opener.factory,
            opener.async_factory,
        )
    run = uuid.uuid4().hex[:12]
    session_id = session_id or f"lost-writes-{run}"
    path = (
        Path(history_file)
        if history_file
        else Path(tempfile.mkdtemp(prefix="memvault-lostwrites-")) / "history.jsonl"
    )
    parts = Path(tempfile.mkdtemp(prefix="memvault-lostwrites-parts-"))
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    procs = [
        ctx.Process(
            target=read_while,
            daemon=True,
            args=(opener, session_id, r, str(parts / f"r{r}.jsonl"), stop, max_reads),
        )
        for r in range(readers)
    ]
    procs += [
        ctx.Process(
            target=write_turns,
            daemon=True,
            args=(opener, session_id, run, w, appends, turn_size, str(parts / f"w{w}.jsonl")),
        )
        for w in range(writers)
    ]
    started = time.monotonic()
    for p in procs:
        p.start()
    deadline = started + timeout
    for p in procs[readers:]:
        p.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    header = {
        "e": "run",
        "run": run,
        "url": redact(opener.url),
        "session_id": session_id,
        "writers": writers,
        "readers": readers,
        "appends": appends,
        "turn_size": turn_size,
        "seconds": round(time.monotonic() - started, 3),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for part in sorted(parts.glob("*.jsonl")):
            out.write(part.read_text(encoding="utf-8"))
            part.unlink()
        out.write(json.dumps(_final(opener, session_id), ensure_ascii=False) + "\n")
    parts.rmdir()
    return analyze_history(path)


def analyze_history(path: str | Path) -> LostWriteReport:
    """Audit a history file (from :func:`check_concurrent_appends` or another tool)."""
    with Path(path).open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    report = audit(parse_all(records), checksum)
    report.history_file = str(path)
    return report


__all__ = ["analyze_history", "check_concurrent_appends", "checksum", "make_turn"]
