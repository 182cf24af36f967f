"""Export sessions as JSONL, and import them into any store.

The format (version 1) is one JSON object per line; a session's block is::

    {"type": "session", "id": "user-42", "format": 1}
    {"type": "message", "message": {...}}        each message once, visible ones first
    {"type": "snapshot", "name": "before-tool", "messages": ["<id>", ...]}
    {"type": "summary", "message": "<id>", "through": "<id>"}   each summary, oldest first
    {"type": "history", "messages": ["<id>", ...]}

``message`` lines carry every field of :class:`~memvault.Message` (ids and
timestamps included). ``snapshot`` lines list the user snapshots, oldest first,
by the ids of the messages each one holds; ``summary`` lines name the summaries of
the full view (:meth:`~memvault.Session.summarize`) and the message each was taken
through, and ``history`` lists the full view's messages, summarized ones included
and summaries left out, and ends the block (a block without it is a file cut short, and is refused).
Blocks concatenate: a file may hold any number of sessions, each id once.

What travels: each session's visible history (its originals and its summaries) and
its user snapshots, message for message. What does not: the summary pointers of
snapshots (a snapshot arrives as its messages), the event log, versions, timestamps of sessions and
snapshots, ``auto:`` snapshots (only rollback can make those), and sessions that
hold nothing (no message, no user snapshot).

An import replays appends (in batches within the store's limits), pops, trims,
clears, snapshots, rollbacks and then the summaries through the public API, so the imported sessions
read the same on every backend. Any session the API can build imports back: a
target whose messages are stored already is reached by rolling back to a state
saved earlier, which may leave ``auto:`` snapshots in the imported session. All or
nothing: the whole file is parsed, validated and planned before anything is
written, and if a write fails, the sessions the import created are deleted again,
so a retry starts clean (while it runs, a session is visible as it is built).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memvault.cli.replay import Replay
from memvault.errors import ConflictError, InvalidMessageError, MemvaultError
from memvault.messages import Message, decode_all, encode_message
from memvault.model import Snapshot
from memvault.store import Session, Store, now

FORMAT = 1


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _snapshot_history(store: Store, session_id: str, snap: Snapshot) -> list[Message]:
    """The messages a snapshot holds, read from its pointers (nothing is written)."""
    stored = store.backend.chain(session_id, snap.head, snap.base, None, now())
    if stored is None:  # the session expired or was deleted meanwhile
        return []
    return decode_all(session_id, stored)


def _full_view(store: Store, session_id: str) -> tuple[list[Message], list[tuple[str, str]]]:
    """The full view's messages without its summaries, and each summary's id with the
    id of the message it was taken through, oldest first. A summary comes right after
    its through, at the same depth: that is how the two are told apart."""
    stored = store.backend.history(session_id, None, now(), True)
    messages = decode_all(session_id, stored)
    chain: list[Message] = []
    summaries: list[tuple[str, str]] = []
    for i, (message, (depth, _)) in enumerate(zip(messages, stored, strict=True)):
        if i and depth == stored[i - 1][0]:
            summaries.append((message.id, chain[-1].id))
        else:
            chain.append(message)
    return [*chain, *(m for m in messages if m.id in dict(summaries))], summaries


def export_session(store: Store, session_id: str, *, snapshots: bool = True) -> Iterator[str]:
    """The JSONL lines (without newlines) of one session; nothing if it does not exist
    or holds nothing (an empty history and no user snapshot).

    Args:
        store: the store to read.
        session_id: the session to export.
        snapshots: include the user snapshots (read from their pointers; the export
            writes nothing).
    """
    s = store.session(session_id)
    if s.info() is None:
        return
    shown, summaries = _full_view(store, session_id)
    history = shown[: len(shown) - len(summaries)]
    held = [
        (snap.name, _snapshot_history(store, session_id, snap))
        for snap in (s.snapshots() if snapshots else [])
        if not snap.auto
    ]
    if not history and not held:
        return  # nothing to carry, and nothing an import could rebuild
    yield _line({"type": "session", "id": session_id, "format": FORMAT})
    seen: set[str] = set()
    for message in [*shown, *(m for _, msgs in held for m in msgs)]:
        if message.id not in seen:
            seen.add(message.id)
            yield _line({"type": "message", "message": message.model_dump(mode="json")})
    for name, msgs in held:
        yield _line({"type": "snapshot", "name": name, "messages": [m.id for m in msgs]})
    for summary, through in summaries:
        yield _line({"type": "summary", "message": summary, "through": through})
    yield _line({"type": "history", "messages": [m.id for m in history]})


def export_sessions(store: Store, session_ids: Iterable[str] | None = None) -> Iterator[str]:
    """The JSONL lines of several sessions (default: every live session)."""
    for sid in store.sessions() if session_ids is None else session_ids:
        yield from export_session(store, sid)


@dataclass
class _Block:
    session_id: str
    line: int
    messages: dict[str, Message] = field(default_factory=dict)
    targets: list[tuple[str | None, list[str]]] = field(default_factory=list)  # None: history
    summaries: list[tuple[str, str]] = field(default_factory=list)  # (summary, through)

    @property
    def complete(self) -> bool:
        return bool(self.targets) and self.targets[-1][0] is None


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """The lines with their numbers; text that is not UTF-8 is an error naming its line."""
    it = iter(lines)
    for number in itertools.count(1):
        try:
            yield number, next(it)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise InvalidMessageError(f"import line {number}: not UTF-8 text") from None


def _record(block: _Block | None, record: Any) -> _Block | None:
    """Add one parsed line to ``block``; a session line starts a new block (returned)."""
    kind = record["type"]
    if kind == "session":
        if record.get("format") != FORMAT:
            raise ValueError(f"unsupported format {record.get('format')!r}")
        if not isinstance(record["id"], str):
            raise ValueError(f"a session id is a string, not {record['id']!r}")
        return _Block(record["id"], 0)
    if block is None:
        raise ValueError("a session line must come first")
    if block.complete:
        raise ValueError(f"session {block.session_id!r} continues after its history line")
    if kind == "message":
        message = Message.model_validate(record["message"])
        if message.id in block.messages:
            raise ValueError(f"message {message.id!r} is defined twice")
        block.messages[message.id] = message
    elif kind == "summary":
        summary, through = str(record["message"]), str(record["through"])
        for i in (summary, through):
            if i not in block.messages:
                raise ValueError(f"message {i!r} is not defined above")
        block.summaries.append((summary, through))
    elif kind in ("snapshot", "history"):
        ids = [str(i) for i in record["messages"]]
        missing = [i for i in ids if i not in block.messages]
        if missing:
            raise ValueError(f"message {missing[0]!r} is not defined above")
        if len(set(ids)) != len(ids):
            raise ValueError("a message appears twice in one history")
        name = record["name"] if kind == "snapshot" else None
        if name is not None and any(name == n for n, _ in block.targets):
            raise ValueError(f"snapshot {name!r} is defined twice")
        block.targets.append((name, ids))
    else:
        raise ValueError(f"unknown record type {kind!r}")
    return None


def parse(lines: Iterable[str]) -> list[_Block]:
    """Parse and validate a whole export; raises InvalidMessageError naming the line.

    Each session's block must end with its ``history`` line (a file cut short is
    refused), and a session id may appear once.
    """
    blocks: list[_Block] = []
    number = 0
    for number, text in _numbered(lines):
        if not text.strip():
            continue
        try:
            started = _record(blocks[-1] if blocks else None, json.loads(text))
            if started is not None:
                _close(blocks, number)
                if any(b.session_id == started.session_id for b in blocks):
                    raise ValueError(f"session {started.session_id!r} appears twice")
                started.line = number
                blocks.append(started)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidMessageError(f"import line {number}: {exc}") from exc
    try:
        _close(blocks, number + 1)
    except ValueError as exc:
        raise InvalidMessageError(f"import line {number}: {exc}") from exc
    return blocks


def _close(blocks: list[_Block], number: int) -> None:
    if blocks and not blocks[-1].complete:
        b = blocks[-1]
        raise ValueError(
            f"session {b.session_id!r} (line {b.line}) has no history line: "
            "the file is truncated or damaged"
        )


def _plan(store: Store, block: _Block) -> list[tuple[str, Any]]:
    """Validate a block against the store (id, names, not there yet) and plan it."""
    limits = store.options.limits
    limits.check_session_id(block.session_id)
    if store.session(block.session_id).info() is not None:
        raise ConflictError(f"session {block.session_id!r} already exists")
    plan = Replay(block.session_id, block.targets)
    last = {m: i for i, (_, ids) in enumerate(block.targets) for m in ids}
    for i, (name, ids) in enumerate(block.targets):
        plan.reach(ids, {m for m, j in last.items() if j > i})
        if name is not None:
            plan.snapshot(limits.check_snapshot_name(name))
    return plan.calls


def _batches(store: Store, messages: list[Message]) -> Iterator[list[Message]]:
    """``messages`` in appends within the store's batch limits (count and bytes)."""
    limits = store.options.limits
    batch: list[Message] = []
    size = 0
    for m in messages:
        one = encode_message(m, limits.max_message_bytes).size
        if batch and (len(batch) == limits.max_batch or size + one > limits.max_batch_bytes):
            yield batch
            batch, size = [], 0
        batch.append(m)
        size += one
    if batch:
        yield batch


def _writes(store: Store, block: _Block, calls: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """The planned calls as single writes: appends cut to the store's batch limits."""
    for op, arg in calls:
        if op == "append":
            for batch in _batches(store, [block.messages[i] for i in arg]):
                yield op, batch
        elif op == "pop":
            yield from itertools.repeat((op, None), arg)
        else:
            yield op, arg


def _write(s: Session, op: str, arg: Any, autos: list[str]) -> None:
    """One write; ``autos`` collects the names of the snapshots rollbacks leave."""
    if op == "append":
        s.append(arg, expect_version=None if autos or s.info() else 0)
    elif op == "pop":
        s.pop()
    elif op == "trim":
        s.trim(keep_last=arg)
    elif op == "clear":
        s.clear()
    elif op == "rollback":
        autos.append(s.rollback(autos[arg] if isinstance(arg, int) else arg).name)
    else:
        s.snapshot(arg)


def import_sessions(store: Store, lines: Iterable[str]) -> list[str]:
    """Import every session of an export into ``store``; returns their ids.

    All or nothing: the whole file is parsed, validated and planned before anything
    is written, and if a write fails (say the server goes away), the sessions this
    call created are deleted again, so a retry starts clean. While an import runs,
    its sessions are visible to other readers as they are being built.

    Raises:
        InvalidMessageError: the file is malformed (naming the line), or a session
            cannot be rebuilt; nothing written.
        ConflictError: a session already exists in ``store``; nothing written.
    """
    blocks = parse(lines)
    plans = [(block, _plan(store, block)) for block in blocks]
    created: list[str] = []
    try:
        for block, calls in plans:
            s = store.session(block.session_id)
            autos: list[str] = []
            for op, arg in _writes(store, block, calls):
                _write(s, op, arg, autos)
                if not created or created[-1] != s.id:
                    created.append(s.id)  # ours from its first write on
            for summary, through in block.summaries:
                s.summarize(block.messages[summary], through=through)
    except BaseException:
        for sid in created:
            with contextlib.suppress(MemvaultError):
                store.session(sid).delete()
        raise
    return [block.session_id for block in blocks]


__all__ = ["FORMAT", "export_session", "export_sessions", "import_sessions", "parse"]
