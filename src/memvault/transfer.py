"""Export sessions as JSONL, and import them into any store.

The format (version 1) is one JSON object per line; a session's block is::

    {"type": "session", "id": "user-42", "format": 1}
    {"type": "message", "message": {...}}        each message once, visible ones first
    {"type": "snapshot", "name": "before-tool", "messages": ["<id>", ...]}
    {"type": "history", "messages": ["<id>", ...]}

``message`` lines carry every field of :class:`~memvault.Message` (ids and
timestamps included). ``snapshot`` lines list the user snapshots, oldest first,
by the ids of the messages each one holds; ``history`` lists the visible history.
Blocks concatenate: a file may hold any number of sessions.

What travels: each session's visible history and its user snapshots, message for
message. What does not: the event log, versions, timestamps of sessions and
snapshots, and ``auto:`` snapshots (only rollback can make those). An import
replays appends, pops, trims and snapshots through the public API, so the imported
sessions read the same on every backend, and it checks the whole plan before it
writes anything.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memvault.errors import ConflictError, InvalidMessageError
from memvault.messages import Message
from memvault.store import Store

FORMAT = 1


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _snapshot_history(store: Store, session_id: str, name: str) -> list[Message]:
    """The messages a snapshot holds, read through a temporary fork deleted at once
    (the public API has no other way to read a snapshot without changing the session)."""
    temp = store.session(session_id).fork(f"memvault-export-{uuid.uuid4().hex}", at=name)
    try:
        return temp.history()
    finally:
        temp.delete()


def export_session(store: Store, session_id: str, *, snapshots: bool = True) -> Iterator[str]:
    """The JSONL lines (without newlines) of one session; nothing if it does not exist.

    Args:
        store: the store to read.
        session_id: the session to export.
        snapshots: include the user snapshots (each read through a temporary fork
            that is deleted right after).
    """
    s = store.session(session_id)
    if s.info() is None:
        return
    history = s.history()
    held = [(snap.name, _snapshot_history(store, session_id, snap.name))
            for snap in (s.snapshots() if snapshots else []) if not snap.auto]
    yield _line({"type": "session", "id": session_id, "format": FORMAT})
    seen: set[str] = set()
    for message in [*history, *(m for _, msgs in held for m in msgs)]:
        if message.id not in seen:
            seen.add(message.id)
            yield _line({"type": "message", "message": message.model_dump(mode="json")})
    for name, msgs in held:
        yield _line({"type": "snapshot", "name": name, "messages": [m.id for m in msgs]})
    yield _line({"type": "history", "messages": [m.id for m in history]})


def export_sessions(store: Store, session_ids: Iterable[str] | None = None) -> Iterator[str]:
    """The JSONL lines of several sessions (default: every live session)."""
    for sid in store.sessions() if session_ids is None else session_ids:
        yield from export_session(store, sid)


@dataclass
class _Block:
    session_id: str
    messages: dict[str, Message] = field(default_factory=dict)
    targets: list[tuple[str | None, list[str]]] = field(default_factory=list)  # None: history


def parse(lines: Iterable[str]) -> list[_Block]:
    """Parse and validate an export; raises InvalidMessageError naming the line."""
    blocks: list[_Block] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
            kind = record["type"]
            if kind == "session":
                if record.get("format") != FORMAT:
                    raise ValueError(f"unsupported format {record.get('format')!r}")
                blocks.append(_Block(record["id"]))
                continue
            if not blocks:
                raise ValueError("a session line must come first")
            block = blocks[-1]
            if kind == "message":
                message = Message.model_validate(record["message"])
                block.messages[message.id] = message
            elif kind in ("snapshot", "history"):
                ids = [str(i) for i in record["messages"]]
                missing = [i for i in ids if i not in block.messages]
                if missing:
                    raise ValueError(f"message {missing[0]!r} is not defined above")
                block.targets.append((record["name"] if kind == "snapshot" else None, ids))
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidMessageError(f"import line {number}: {exc}") from exc
    return blocks


class _Plan:
    """Simulates the session's chain to plan the calls that reach each target."""

    def __init__(self, session_id: str) -> None:
        self.sid = session_id
        self.chain: list[str] = []
        self.base = 0
        self.stored: set[str] = set()
        self.calls: list[tuple[str, Any]] = []

    def _new(self, ids: list[str], what: str) -> None:
        if self.stored.intersection(ids) or len(set(ids)) != len(ids):
            raise InvalidMessageError(
                f"cannot import session {self.sid!r}: {what} reuses messages in a way "
                "appends cannot replay")
        self.calls.append(("append", ids))
        self.chain += ids
        self.stored.update(ids)

    def reach(self, target: list[str], what: str) -> None:
        if self.chain[self.base:] == target:
            return
        if not target:
            self.calls.append(("clear", None))
            self.base = len(self.chain)
            return
        start = self.chain.index(target[0]) if target[0] in self.chain else None
        if start is None or start < self.base:
            start, keep = len(self.chain[: self.base]), 0
        else:
            keep = 0
            while (keep < len(target) and start + keep < len(self.chain)
                   and self.chain[start + keep] == target[keep]):
                keep += 1
        for _ in range(len(self.chain) - (start + keep)):
            self.calls.append(("pop", None))
            self.chain.pop()
        if keep < len(target):
            self._new(target[keep:], what)
        if self.base < start:
            self.calls.append(("trim", len(target)))
            self.base = start

    def snapshot(self, name: str) -> None:
        self.calls.append(("snapshot", name))


def import_sessions(store: Store, lines: Iterable[str]) -> list[str]:
    """Import every session of an export into ``store``; returns their ids.

    Raises:
        InvalidMessageError: the file is malformed or cannot be replayed; nothing written.
        ConflictError: a session already exists in ``store``; nothing written.
    """
    blocks = parse(lines)
    plans = []
    for block in blocks:
        if store.session(block.session_id).info() is not None:
            raise ConflictError(f"session {block.session_id!r} already exists")
        plan = _Plan(block.session_id)
        for name, ids in block.targets:
            plan.reach(ids, "history" if name is None else f"snapshot {name!r}")
            if name is not None:
                plan.snapshot(name)
        plans.append((block, plan))
    for block, plan in plans:
        s = store.session(block.session_id)
        for op, arg in plan.calls:
            if op == "append":
                s.append([block.messages[i] for i in arg])
            elif op == "pop":
                s.pop()
            elif op == "trim":
                s.trim(keep_last=arg)
            elif op == "clear":
                s.clear()
            else:
                s.snapshot(arg)
    return [block.session_id for block in blocks]


__all__ = ["FORMAT", "export_session", "export_sessions", "import_sessions", "parse"]
