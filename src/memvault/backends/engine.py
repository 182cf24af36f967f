"""The operation logic shared by the backends that run it in Python (memory, SQLite).

:class:`Engine` implements the whole :class:`~memvault.backends.base.Backend`
protocol on top of a few storage primitives (:class:`Txn`), each call inside one
transaction. Every check runs before the first change, so an operation that
raises has changed nothing. Redis and PostgreSQL run the same logic server-side
(Lua, SQL) and are checked against this one by the contract suite.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from memvault.backends.base import Stored, Write
from memvault.errors import (
    ConflictError,
    CorruptRecordError,
    DuplicateMessageError,
    SnapshotExistsError,
    SnapshotNotFoundError,
)
from memvault.messages import Record, decode_message
from memvault.model import AUTO_PREFIX, CompactStats, Event, SessionInfo, Snapshot, to_datetime, utc


def version_conflict(session_id: str, current: int, expected: int) -> ConflictError:
    """``expect_version`` did not match."""
    return ConflictError(f"session {session_id!r} is at version {current}, expected {expected}")


def session_exists(session_id: str) -> ConflictError:
    """A fork onto a live session."""
    return ConflictError(f"session {session_id!r} already exists")


def duplicate_ids(session_id: str, stored: int, total: int, example: str) -> DuplicateMessageError:
    """A batch mixing stored and new ids; ``example`` is the smallest stored id."""
    return DuplicateMessageError(
        f"session {session_id!r}: {stored} of {total} message ids are already stored "
        f"(e.g. {example!r}); nothing was written"
    )


def snapshot_exists(session_id: str, name: str) -> SnapshotExistsError:
    return SnapshotExistsError(f"session {session_id!r} already has snapshot {name!r}")


def snapshot_missing(session_id: str, name: str) -> SnapshotNotFoundError:
    return SnapshotNotFoundError(f"session {session_id!r} has no snapshot {name!r}")


BROKEN_CHAIN = "the chain is broken here (a message is missing or linked to the wrong parent)"
T = TypeVar("T")


def check_chain(session_id: str, depths: Sequence[int], top: int, count: int) -> None:
    """Check a walk of a chain: ``depths`` were read newest first from a head at depth
    ``top``, wanting ``count`` nodes. Each step goes down exactly one level, so a
    missing node, a node that is its own parent or a link into another branch shows
    as a depth out of place, or as too few nodes.

    Raises:
        CorruptRecordError: naming the first depth that is not where it should be.
    """
    for k, depth in enumerate(depths):
        if depth != top - k:
            raise CorruptRecordError(session_id, top - k, BROKEN_CHAIN)
    if len(depths) != count:
        raise CorruptRecordError(session_id, top - len(depths), BROKEN_CHAIN)


def decoded(session_id: str, what: str, parse: Callable[[], T]) -> T:
    """``parse()`` of a stored record other than a message (an event, a snapshot);
    whatever it raises on damaged data becomes CorruptRecordError naming ``what``."""
    try:
        return parse()
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            RecursionError) as exc:
        raise CorruptRecordError(session_id, None, f"{what} cannot be decoded ({exc})") \
            from exc


def json_object(text: str | bytes) -> dict[str, object]:
    """A stored JSON object (an event's detail); ValueError if it is anything else."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {type(value).__name__}")
    return value


@dataclass
class Row:
    """A session's state as stored. ``head`` 0 means no message; ``key`` is the
    backend's own handle for the session."""

    key: int | str
    name: str
    head: int
    depth: int
    base: int
    version: int
    next_node: int
    created_at: float
    updated_at: float
    expires_at: float | None

    def live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now

    @property
    def length(self) -> int:
        return self.depth - self.base


@dataclass(frozen=True)
class Node:
    """One stored message: immutable once written."""

    node: int
    parent: int
    depth: int
    msg_id: str
    body: str


class Txn(Protocol):
    """Storage primitives, called inside one transaction."""

    def load(self, name: str) -> Row | None: ...
    def create(self, name: str, now: float) -> Row: ...
    def save(self, row: Row) -> None: ...
    def purge(self, row: Row) -> int: ...
    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]: ...
    def insert_nodes(self, row: Row, nodes: Sequence[Node]) -> None: ...
    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        """At most ``count`` nodes from ``head`` back, newest first, stopping early at a
        missing node (the engine checks what came back)."""
        ...
    def add_event(self, row: Row, event: Event) -> None: ...
    def events(self, row: Row) -> list[Event]: ...
    def drop_events(self, row: Row, keep_last: int) -> int: ...
    def get_snapshot(self, row: Row, name: str) -> Snapshot | None: ...
    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None: ...
    def snapshots(self, row: Row) -> list[Snapshot]: ...
    def rows(self) -> list[Row]: ...
    def links(self, row: Row) -> dict[int, tuple[int, int]]: ...
    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None: ...


class Engine:
    """A :class:`~memvault.backends.base.Backend` over :class:`Txn` primitives."""

    def transaction(self, write: bool) -> contextlib.AbstractContextManager[Txn]:
        """One transaction; ``write`` transactions are serialized per store."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the backend's resources."""

    @staticmethod
    def _live(txn: Txn, name: str, now: float) -> Row | None:
        row = txn.load(name)
        return row if row is not None and row.live(now) else None

    @staticmethod
    def _start(txn: Txn, name: str, row: Row | None, w: Write) -> Row:
        """The live row to write to; an expired session is purged and starts afresh."""
        if row is not None and row.live(w.now):
            return row
        stale = txn.load(name)
        if stale is not None:
            txn.purge(stale)
        return txn.create(name, w.now)

    @staticmethod
    def _commit(
        txn: Txn, row: Row, op: str, w: Write, before: tuple[int, int], detail: dict[str, object],
        *, bump: bool = True,
    ) -> None:
        if bump:
            row.version += 1
        row.updated_at = w.now
        row.expires_at = w.expires_at
        txn.save(row)
        txn.add_event(
            row,
            Event(row.version, op, w.writer, utc(w.now), before[0], before[1],
                  row.head, row.base, detail),
        )

    @staticmethod
    def _chain(txn: Txn, row: Row, head: int, top: int, count: int) -> list[Node]:
        """The ``count`` nodes from ``head`` (at depth ``top``) back, newest first;
        CorruptRecordError if the chain is broken."""
        nodes = txn.chain(row, head, count) if count else []
        check_chain(row.name, [n.depth for n in nodes], top, count)
        return nodes

    @staticmethod
    def _add_nodes(txn: Txn, row: Row, items: Sequence[tuple[str, str]]) -> None:
        nodes = []
        for msg_id, body in items:
            nodes.append(Node(row.next_node, row.head, row.depth + 1, msg_id, body))
            row.head, row.depth, row.next_node = row.next_node, row.depth + 1, row.next_node + 1
        txn.insert_nodes(row, nodes)

    def append(
        self, session_id: str, records: Sequence[Record], expect_version: int | None, w: Write
    ) -> int:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            stored = txn.stored_ids(row, [r.id for r in records]) if row else set()
            if stored:
                if len(stored) == len(records):
                    return row.version if row else 0
                raise duplicate_ids(session_id, len(stored), len(records), sorted(stored)[0])
            current = row.version if row else 0
            if expect_version is not None and expect_version != current:
                raise version_conflict(session_id, current, expect_version)
            row = self._start(txn, session_id, row, w)
            before = (row.head, row.base)
            self._add_nodes(txn, row, [(r.id, r.body) for r in records])
            self._commit(txn, row, "append", w, before, {"messages": len(records)})
            return row.version

    def history(self, session_id: str, last: int | None, now: float) -> list[Stored]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            if row is None:
                return []
            count = row.length if last is None else min(last, row.length)
            nodes = self._chain(txn, row, row.head, row.depth, count)
            return [(n.depth, n.body) for n in reversed(nodes)]

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            if row is None:
                return None
            return SessionInfo(
                session_id, row.version, row.length, utc(row.created_at),
                utc(row.updated_at), to_datetime(row.expires_at),
            )

    def pop(self, session_id: str, w: Write) -> Stored | None:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            if row is None or row.length == 0:
                return None
            node = self._chain(txn, row, row.head, row.depth, 1)[0]
            # decoded before the commit: a pop whose message cannot be returned changes
            # nothing (a retry would pop a second message)
            decode_message(session_id, node.depth, node.body)
            before = (row.head, row.base)
            row.head, row.depth = node.parent, node.depth - 1
            self._commit(txn, row, "pop", w, before, {"message_id": node.msg_id})
            return (node.depth, node.body)

    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            if row is None:
                return 0
            base = max(row.base, row.depth - keep_last)
            if base == row.base:
                return row.version
            before = (row.head, row.base)
            row.base = base
            self._commit(txn, row, op, w, before, {"hidden": base - before[1]})
            return row.version

    def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            if row is not None and txn.get_snapshot(row, name) is not None:
                raise snapshot_exists(session_id, name)
            row = self._start(txn, session_id, row, w)
            snap = self._save_snapshot(txn, row, name, w, auto=False)
            self._commit(txn, row, "snapshot", w, (row.head, row.base), {"name": name}, bump=False)
            return snap

    @staticmethod
    def _save_snapshot(txn: Txn, row: Row, name: str, w: Write, *, auto: bool) -> Snapshot:
        snap = Snapshot(name, row.head, row.base, row.version, row.length,
                        utc(w.now), auto)
        txn.put_snapshot(row, snap)
        return snap

    def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            return txn.snapshots(row) if row else []

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            target = txn.get_snapshot(row, name) if row else None
            if row is None or target is None:
                raise snapshot_missing(session_id, name)
            saved = self._save_snapshot(
                txn, row, f"{AUTO_PREFIX}pre-rollback@v{row.version}", w, auto=True
            )
            before = (row.head, row.base)
            row.head, row.base, row.depth = target.head, target.base, target.base + target.length
            self._commit(txn, row, "rollback", w, before, {"to": name, "saved": saved.name})
            return saved

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        with self.transaction(True) as txn:
            source = self._live(txn, session_id, w.now)
            if self._live(txn, new_id, w.now) is not None:
                raise session_exists(new_id)
            head, top, count = (source.head, source.depth, source.length) if source else (0, 0, 0)
            if at is not None:
                snap = txn.get_snapshot(source, at) if source else None
                if snap is None:
                    raise snapshot_missing(session_id, at)
                head, top, count = snap.head, snap.base + snap.length, snap.length
            nodes = self._chain(txn, source, head, top, count) if source else []
            row = self._start(txn, new_id, None, w)
            self._add_nodes(txn, row, [(n.msg_id, n.body) for n in reversed(nodes)])
            self._commit(txn, row, "fork", w, (0, 0), {"from": session_id, "at": at})

    def log(self, session_id: str, now: float) -> list[Event]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            return txn.events(row) if row else []

    def delete(self, session_id: str, now: float) -> bool:
        with self.transaction(True) as txn:
            row = txn.load(session_id)
            if row is None:
                return False
            txn.purge(row)
            return row.live(now)

    def sessions(self, now: float) -> list[str]:
        with self.transaction(False) as txn:
            return sorted(row.name for row in txn.rows() if row.live(now))

    def compact(self, keep_events: int | None, now: float) -> CompactStats:
        nodes = events = sessions = 0
        with self.transaction(True) as txn:
            for row in txn.rows():
                if not row.live(now):
                    nodes += txn.purge(row)
                    sessions += 1
                    continue
                if keep_events is not None:
                    events += txn.drop_events(row, keep_events)
                pointers = [(row.head, row.base)]
                pointers += [(s.head, s.base) for s in txn.snapshots(row)]
                for e in txn.events(row):
                    pointers += [(e.head_before, e.base_before), (e.head_after, e.base_after)]
                links = txn.links(row)
                dead = set(links) - _reachable(row.name, links, pointers)
                if dead:
                    txn.delete_nodes(row, sorted(dead))
                    nodes += len(dead)
        return CompactStats(nodes=nodes, events=events, sessions=sessions)


def _reachable(session_id: str, links: dict[int, tuple[int, int]],
               pointers: list[tuple[int, int]]) -> set[int]:
    """Nodes visible from any ``(head, base)`` pointer: the chain above its base.

    Raises:
        CorruptRecordError: a chain is broken (then nothing is deleted: what lies
            below the break may still be wanted).
    """
    keep: set[int] = set()
    for head, base in set(pointers):
        if head == 0:
            continue  # an empty history
        if head not in links:
            raise CorruptRecordError(session_id, None, f"message node {head} is missing")
        node, depth = head, links[head][1]
        while depth > base:
            if node not in links or links[node][1] != depth:
                raise CorruptRecordError(session_id, depth, BROKEN_CHAIN)
            keep.add(node)
            node, depth = links[node][0], depth - 1
    return keep
