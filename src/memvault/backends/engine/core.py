"""The operation logic shared by the backends that run it in Python (memory, SQLite).

:class:`Engine` implements the whole :class:`~memvault.backends.base.Backend`
protocol on top of a few storage primitives (:class:`Txn`), each call inside one
transaction. Every check runs before the first change, so an operation that
raises has changed nothing. Redis and PostgreSQL run the same logic server-side
(Lua, SQL) and are checked against this one by the contract suite.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from memvault.backends.base import Stored, Write
from memvault.backends.engine import compaction
from memvault.errors import (  # the texts every backend shares (Redis's, PostgreSQL's too)
    broken_chain,
    duplicate_ids,
    hidden_through,
    message_missing,
    not_stored,
    session_exists,
    snapshot_exists,
    snapshot_missing,
    summarized_through,
    unknown_through,
    version_conflict,
)
from memvault.messages import Record, decode_message
from memvault.model import (
    AUTO_PREFIX,
    COMPACT_BATCH,
    CompactStats,
    Event,
    Progress,
    SessionInfo,
    Snapshot,
    check_snapshot,
    to_datetime,
    utc,
)
from memvault.paging import Listed, PageQuery, key_of, select

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
            raise broken_chain(session_id, top - k)
    if len(depths) != count:
        raise broken_chain(session_id, top - len(depths))


@dataclass
class Row:
    """A session's state as stored; the engine changes it and hands it to
    :meth:`Txn.save`.

    Attributes:
        key: the backend's own handle for the session (a rowid, the name...).
        name: the session id.
        head: the newest node of the chain; 0 when the session has no message.
        depth: the head's depth (0 with no message).
        base: the trim floor: nodes at ``depth <= base`` are hidden.
        version: +1 on every change to the visible history.
        next_node: the id the next inserted node gets (node ids grow per session).
        created_at / updated_at / expires_at: epoch seconds (``expires_at`` None: never).
        summary / through: the summary pointer: the node of the newest summary (0:
            none) and the depth of the last message it stands for.
    """

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
    summary: int = 0
    through: int = 0

    def live(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at > now

    @property
    def length(self) -> int:
        """Messages of the full view: the chain above base."""
        return self.depth - self.base

    @property
    def shows_summary(self) -> bool:
        """Whether the context view starts with the summary: some of its range is
        above base (a trim or clear past ``through`` hides the summary too)."""
        return self.summary != 0 and self.through > self.base

    @property
    def floor(self) -> int:
        """The context view shows the chain above this depth (after the summary)."""
        return max(self.base, self.through)

    @property
    def view(self) -> int:
        """Messages of the context view: the summary, then the chain above the floor."""
        return self.depth - self.floor + int(self.shows_summary)

    @property
    def summarized(self) -> int:
        """Messages the summary stands for in the context view."""
        return self.through - self.base if self.shows_summary else 0

    def info(self) -> SessionInfo:
        """The session's :class:`~memvault.model.SessionInfo`."""
        return SessionInfo(
            self.name,
            self.version,
            self.view,
            utc(self.created_at),
            utc(self.updated_at),
            to_datetime(self.expires_at),
            self.summarized,
        )


class Node(NamedTuple):
    """One stored message: immutable once written. A named tuple: an append makes one
    a message, and a frozen dataclass took 0.56 µs to build (0.23 µs now).

    Attributes:
        node: its id within the session.
        parent: the previous node's id (0 for the first message).
        depth: the parent's depth + 1 (1 for the first message).
        msg_id: the message's id (idempotent appends match on it).
        body: the encoded message, stored and returned unchanged.

    A summary is a node off the chain (no message has it as parent): its parent is
    the previous summary (0: none) and its depth is the ``through`` it was taken at.
    """

    node: int
    parent: int
    depth: int
    msg_id: str
    body: str


class Txn(Protocol):
    """The storage primitives a backend provides to :class:`Engine`.

    Every call happens inside one transaction (:meth:`Engine.transaction`), so a
    primitive never has to be atomic on its own: the engine checks everything
    before its first write, and a transaction whose operation raised must leave no
    trace (roll back, or simply not write). ``row`` is always one :meth:`load` or
    :meth:`create` returned in the same transaction; a primitive finds the session's
    data through ``row.key``.
    """

    def load(self, name: str) -> Row | None:
        """The stored state of session ``name``, expired or not; None if there is none."""
        ...

    def create(self, name: str, now: float) -> Row:
        """Store a new, empty session ``name`` (head 0, version 0, next node 1, created
        and updated at ``now``, no expiry) and return its row, with the backend's own
        ``key``. Called only when no row of that name is stored."""
        ...

    def save(self, row: Row) -> None:
        """Store ``row``'s pointers, counters and times (everything but its name and key)."""
        ...

    def purge(self, row: Row) -> int:
        """Delete the session physically: its row, nodes, snapshots and events.
        Returns how many nodes were deleted."""
        ...

    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are message ids of nodes stored in the session (visible or not)."""
        ...

    def insert_nodes(self, row: Row, nodes: Sequence[Node]) -> None:
        """Store new nodes, oldest first (the engine has already moved ``row``'s head)."""
        ...

    def node(self, row: Row, node: int) -> Node | None:
        """Node ``node`` of the session; None if it is not stored."""
        ...

    def find(self, row: Row, msg_id: str) -> Node | None:
        """The session's node whose message id is ``msg_id`` (visible or not, on the
        chain or a summary); None if there is none."""
        ...

    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        """At most ``count`` nodes from ``head`` back along their parents, newest first
        (``head`` itself first), stopping early at a node that is not stored. The
        engine asks only for nodes the session's pointers reach and checks what came
        back, so a missing or misplaced node is corruption, never a shorter history."""
        ...

    def add_event(self, row: Row, event: Event) -> None:
        """Append ``event`` to the session's operation log."""
        ...

    def events(self, row: Row) -> list[Event]:
        """The session's operation log, oldest first, in the order they were added."""
        ...

    def drop_events(self, row: Row, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` events; returns how many were deleted."""
        ...

    def get_snapshot(self, row: Row, name: str) -> Snapshot | None:
        """The session's snapshot ``name``; None if there is none."""
        ...

    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None:
        """Store a new snapshot (the engine has checked that its name is free)."""
        ...

    def snapshots(self, row: Row) -> list[Snapshot]:
        """The session's snapshots, in the order they were taken."""
        ...

    def rows(self) -> list[Row]:
        """Every stored session's row, expired ones included (``sessions`` and
        ``compact`` filter them)."""
        ...

    def links(self, row: Row) -> dict[int, tuple[int, int]]:
        """Every stored node of the session: node -> (parent, depth). ``compact`` walks
        it to find what no pointer reaches."""
        ...

    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None:
        """Delete these nodes of the session (none of them is reachable any more;
        one a concurrent compact deleted already is skipped)."""
        ...

    # Search vectors (memvault.vectors): store-wide, keyed by their text's hash.
    def vector_space(self) -> str | None:
        """The embedder the stored vectors were made by; None if none is recorded."""
        ...

    def set_vector_space(self, space: str, reset: bool) -> None:
        """Record ``space``; ``reset``: delete every stored vector first."""
        ...

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors of those of ``keys`` that have one."""
        ...

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store vectors; a key stored already keeps its vector (same text, same vector)."""
        ...

    def vector_keys(self) -> list[str]:
        """The key of every stored vector."""
        ...

    def drop_vectors(self, keys: Sequence[str]) -> None:
        """Delete the vectors of ``keys`` (one not stored is skipped)."""
        ...

    def bodies(self, row: Row) -> list[str]:
        """The body of every stored node of the session (messages and summaries,
        hidden or not), in any order."""
        ...


class Engine:
    """A :class:`~memvault.backends.base.Backend` over :class:`Txn` primitives."""

    def transaction(self, write: bool) -> contextlib.AbstractContextManager[Txn]:
        """One transaction; ``write`` transactions are serialized per store."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the backend's resources."""

    # The search vectors (memvault.backends.base.VectorStore); append and summarize store
    # their records' vectors in their own transaction.
    def vector_space(self) -> str | None:
        with self.transaction(False) as txn:
            return txn.vector_space()

    def set_vector_space(self, space: str, reset: bool) -> None:
        with self.transaction(True) as txn:
            txn.set_vector_space(space, reset)

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        with self.transaction(False) as txn:
            return txn.get_vectors(keys)

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        with self.transaction(True) as txn:
            txn.put_vectors(items)

    def vector_keys(self) -> list[str]:
        with self.transaction(False) as txn:
            return txn.vector_keys()

    def drop_vectors(self, keys: Sequence[str]) -> None:
        with self.transaction(True) as txn:
            txn.drop_vectors(keys)

    def node_bodies(self, session_id: str, now: float) -> list[str]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            return [] if row is None else txn.bodies(row)

    @staticmethod
    def _store_vectors(txn: Txn, records: Sequence[Record]) -> None:
        items = [r.vector for r in records if r.vector is not None]
        if items:
            txn.put_vectors(items)

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
    def _live_ids(
        txn: Txn, name: str, ids: Sequence[str], now: float
    ) -> tuple[Row | None, set[str]]:
        """The live row of session ``name`` (None if there is none) and which of ``ids``
        it stores (a backend that reads both in one statement overrides this)."""
        row = Engine._live(txn, name, now)
        return row, txn.stored_ids(row, ids) if row else set()

    def _commit(
        self,
        txn: Txn,
        row: Row,
        op: str,
        w: Write,
        before: tuple[int, int],
        detail: dict[str, object],
        *,
        bump: bool = True,
    ) -> None:
        if bump:
            row.version += 1
        row.updated_at = w.now
        row.expires_at = w.expires_at
        txn.save(row)
        self._log(txn, row, op, w, before, detail)

    @staticmethod
    def _log(
        txn: Txn, row: Row, op: str, w: Write, before: tuple[int, int], detail: dict[str, object]
    ) -> None:
        """Add the operation's event to the session's log (a backend that stores its
        fields as they are overrides this: an :class:`Event` costs every write)."""
        txn.add_event(
            row,
            Event(
                row.version,
                op,
                w.writer,
                utc(w.now),
                before[0],
                before[1],
                row.head,
                row.base,
                detail,
            ),
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
        """Chain messages ``(msg_id, body)`` onto the head, oldest first (a backend that
        stores them without :class:`Node` objects overrides this)."""
        nodes = []
        for msg_id, body in items:
            nodes.append(Node(row.next_node, row.head, row.depth + 1, msg_id, body))
            row.head, row.depth, row.next_node = row.next_node, row.depth + 1, row.next_node + 1
        txn.insert_nodes(row, nodes)

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        with self.transaction(True) as txn:
            ids = [r.id for r in records]
            # One look-up for the batch and the expected message (it is not in the batch:
            # a batch that names it would be a retry, decided by the batch's own ids).
            row, found = self._live_ids(
                txn, session_id, [*ids, expect_message] if expect_message else ids, w.now
            )
            stored = found.intersection(ids) if found else found
            if stored:
                if len(stored) == len(records):
                    return row.version if row else 0
                raise duplicate_ids(session_id, len(stored), len(records), sorted(stored)[0])
            current = row.version if row else 0
            if expect_version is not None and expect_version != current:
                raise version_conflict(session_id, current, expect_version)
            if expect_message is not None and expect_message not in found:
                raise not_stored(session_id, expect_message)
            row = self._start(txn, session_id, row, w)
            before = (row.head, row.base)
            self._add_nodes(txn, row, [(r.id, r.body) for r in records])
            self._store_vectors(txn, records)
            self._commit(txn, row, "append", w, before, {"messages": len(records)})
            return row.version

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            if row is None:
                return []
            return self._full(txn, row, last) if full else self._context(txn, row, last)

    @staticmethod
    def _context(txn: Txn, row: Row, last: int | None) -> list[Stored]:
        """The context view's newest ``last``: O(last), the summary read only if it fits."""
        above = row.depth - row.floor
        out = _read(txn, row, row.head, row.depth, above, last)
        if row.shows_summary and (last is None or last > above):
            summary = _stored(txn, row, row.summary, row.through)
            out.insert(0, (summary.depth, summary.body))
        return out

    @classmethod
    def _full(cls, txn: Txn, row: Row, last: int | None) -> list[Stored]:
        """Every message above base, each visible summary right after its ``through``."""
        summaries: dict[int, Node] = {}
        node = row.summary
        while node:
            summary = _stored(txn, row, node, row.through)
            if summary.depth <= row.base:
                break
            summaries[summary.depth] = summary
            node = summary.parent
        out: list[Stored] = []
        for n in cls._chain(txn, row, row.head, row.depth, row.length):
            if n.depth in summaries:
                out.append((n.depth, summaries[n.depth].body))
            out.append((n.depth, n.body))
        out.reverse()
        return out if last is None else out[len(out) - min(last, len(out)) :]

    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            if row is None or head == 0:
                return []
            top = txn.node(row, head)
            if top is None:
                return None
            return _read(txn, row, head, top.depth, top.depth - base, last)

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            return None if row is None else row.info()

    def pop(self, session_id: str, w: Write) -> Stored | None:
        """Hide the newest message of the context view. When that is the summary (no
        message after it), the summary is undone: the previous one, if any, is back."""
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            if row is None or row.view == 0:
                return None
            before = (row.head, row.base)
            if row.depth > row.floor:
                # the new head, unless hidden (compact may have deleted it), must sit
                # one level lower: a pop never leaves head and depth apart
                node = self._chain(txn, row, row.head, row.depth, min(2, row.length))[0]
                row.head, row.depth = node.parent, node.depth - 1
                detail: dict[str, object] = {"message_id": node.msg_id}
            else:
                node = _stored(txn, row, row.summary, row.through)
                row.summary = node.parent
                # a missing earlier summary is named at the undone one's depth (its
                # own is not known without it), as Redis and PostgreSQL name it
                row.through = _stored(txn, row, node.parent, node.depth).depth if node.parent else 0
                detail = {"summary_id": node.msg_id}
            # decoded before the commit: a pop whose message cannot be returned changes
            # nothing (a retry would pop a second message)
            decode_message(session_id, node.depth, node.body)
            self._commit(txn, row, "pop", w, before, detail)
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
        snap = Snapshot(
            name,
            row.head,
            row.base,
            row.version,
            row.length,
            utc(w.now),
            auto,
            row.summary,
            row.through,
        )
        txn.put_snapshot(row, snap)
        return snap

    def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, now)
            return (
                [check_snapshot(session_id, snap, row.next_node) for snap in txn.snapshots(row)]
                if row
                else []
            )

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            target = txn.get_snapshot(row, name) if row else None
            if row is None or target is None:
                raise snapshot_missing(session_id, name)
            check_snapshot(session_id, target, row.next_node)
            saved = self._save_snapshot(
                txn, row, f"{AUTO_PREFIX}pre-rollback@v{row.version}", w, auto=True
            )
            before = (row.head, row.base)
            row.head, row.base, row.depth = target.head, target.base, target.base + target.length
            row.summary, row.through = target.summary, target.through
            self._commit(txn, row, "rollback", w, before, {"to": name, "saved": saved.name})
            return saved

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        """Copy the full view (or snapshot ``at``'s) into ``new_id``, and the summary
        its context view starts with, if any (older summaries are not copied)."""
        with self.transaction(True) as txn:
            source = self._live(txn, session_id, w.now)
            if self._live(txn, new_id, w.now) is not None:
                raise session_exists(new_id)
            head, top, count, base, summary, through = (
                (
                    source.head,
                    source.depth,
                    source.length,
                    source.base,
                    source.summary,
                    source.through,
                )
                if source
                else (0, 0, 0, 0, 0, 0)
            )
            if at is not None:
                snap = txn.get_snapshot(source, at) if source else None
                if source is None or snap is None:
                    raise snapshot_missing(session_id, at)
                check_snapshot(session_id, snap, source.next_node)
                head, top, count, base, summary, through = (
                    snap.head,
                    snap.base + snap.length,
                    snap.length,
                    snap.base,
                    snap.summary,
                    snap.through,
                )
            # everything is read before anything is written: memory has no rollback
            nodes = self._chain(txn, source, head, top, count) if source else []
            kept = (
                _stored(txn, source, summary, through)
                if source and summary and through > base
                else None
            )
            row = self._start(txn, new_id, None, w)
            self._add_nodes(txn, row, [(n.msg_id, n.body) for n in reversed(nodes)])
            if kept is not None:
                self._add_summary(txn, row, kept, through - base, 0)
            self._commit(txn, row, "fork", w, (0, 0), {"from": session_id, "at": at})

    def _add_summary(
        self, txn: Txn, row: Row, summary: Node | Record, through: int, parent: int
    ) -> None:
        """Store ``summary`` off the chain (its parent: the previous summary; its depth:
        ``through``) and point the session at it."""
        msg_id = summary.msg_id if isinstance(summary, Node) else summary.id
        self._insert_summary(txn, row, Node(row.next_node, parent, through, msg_id, summary.body))
        row.summary, row.through, row.next_node = row.next_node, through, row.next_node + 1

    @staticmethod
    def _insert_summary(txn: Txn, row: Row, node: Node) -> None:
        """Store a summary node (a backend that tells summaries apart overrides this)."""
        txn.insert_nodes(row, [node])

    def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> int:
        """Point the session at a new summary standing for the messages through
        ``through``. Checks in order: a stored summary id (a retry of the current
        summary is a no-op), ``expect_version``, then ``through``."""
        with self.transaction(True) as txn:
            row = self._live(txn, session_id, w.now)
            stored = txn.find(row, record.id) if row else None
            if row is not None and stored is not None:
                if stored.node == row.summary:
                    return row.version
                raise duplicate_ids(session_id, 1, 1, record.id)
            current = row.version if row else 0
            if expect_version is not None and expect_version != current:
                raise version_conflict(session_id, current, expect_version)
            target = txn.find(row, through) if row else None
            if row is None or target is None:
                raise unknown_through(session_id, through)
            if (
                not row.base < target.depth <= row.depth
                or txn.chain(row, row.head, row.depth - target.depth + 1)[-1].node != target.node
            ):
                raise hidden_through(session_id, through)
            if target.depth <= row.through:
                raise summarized_through(session_id, through)
            folded = target.depth - row.floor
            self._add_summary(txn, row, record, target.depth, row.summary)
            self._store_vectors(txn, [record])
            self._commit(
                txn,
                row,
                "summarize",
                w,
                (row.head, row.base),
                {"summary_id": record.id, "through": through, "messages": folded},
            )
            return row.version

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

    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        """Every live row, filtered, ordered and cut in Python (O(sessions)); a backend
        with an index on the keys overrides it."""
        with self.transaction(False) as txn:
            return select(
                query,
                [
                    (info, key_of(info, query.order, (row.updated_at, row.expires_at)))
                    for row in txn.rows()
                    if row.live(now)
                    for info in [row.info()]
                ],
            )

    def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        return compaction.compact(self.transaction, keep_events, now, batch, progress)


def _stored(txn: Txn, row: Row, node: int, depth: int) -> Node:
    """Node ``node`` (at ``depth``, for the error), which the session's pointers reach."""
    found = txn.node(row, node)
    if found is None:
        raise message_missing(row.name, depth)
    return found


def _read(txn: Txn, row: Row, head: int, top: int, count: int, last: int | None) -> list[Stored]:
    """The ``count`` nodes from ``head`` (at depth ``top``) back (the newest ``last`` of
    them), oldest first; CorruptRecordError if the chain is broken."""
    count = max(0, count if last is None else min(last, count))
    nodes = Engine._chain(txn, row, head, top, count)
    return [(n.depth, n.body) for n in reversed(nodes)]
