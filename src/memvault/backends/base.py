"""The protocol every backend implements: :class:`Backend` (sync), :class:`AsyncBackend`
(the same methods, awaited), and the optional capabilities :class:`Searching` and
:class:`VectorStore`.

What a backend receives: the facade (:mod:`memvault.store`, :mod:`memvault.aio`)
checks every argument before any I/O, so a backend never sees a bad one. Session
ids and snapshot names passed
:meth:`~memvault.model.Limits.check_session_id` /
:meth:`~memvault.model.Limits.check_snapshot_name` (non-empty strings of valid
Unicode within the limits; NUL, quotes and RTL marks included: store them exactly);
counts (``last``, ``keep_last``, ``keep_events``, ``expect_version``) are ints from
0 to 2**63-1; ``expect_message`` and ``through`` are message ids; records are
encoded and within the limits, their ids distinct within the batch. Time comes from
the facade too: ``now`` (epoch seconds) for a read, a :class:`Write` for a write; a
backend never reads the clock, so every backend expires sessions alike.

What a backend promises (the contract suite, :mod:`memvault.testing`, checks each
one): every method is one atomic step (all of it or nothing, whatever runs
concurrently in other threads or processes), checks everything before its first
change (a method that raises has changed nothing), and answers a session that is
not live (never written, deleted, or expired at ``now``) as if it did not exist.
Stored messages travel as :data:`Stored` pairs ``(depth, body)``, oldest first;
the facade decodes them. Errors: the domain errors below (built with the helpers
of :mod:`memvault.errors`, so every backend words them alike), and for a failure
of the engine itself :class:`~memvault.errors.BackendUnavailableError` (nothing
was applied), :class:`~memvault.errors.OutcomeUnknownError` (a write may have
been applied) or :class:`~memvault.errors.BackendError`, the driver's error as
``__cause__``. After :meth:`Backend.close`, every method raises
``BackendUnavailableError("the store is closed")``.

A backend is either a :class:`~memvault.backends.engine.core.Engine` over storage
primitives (:class:`~memvault.backends.engine.core.Txn`: memory, SQLite, the
JSON-file example) or runs each operation server-side (Redis, PostgreSQL):
docs/testing.md, "Writing a backend: two routes". A sync backend's async face is
:class:`~memvault.backends.threaded.ThreadedAsyncBackend`, unless its module has
``open_async_backend`` (:mod:`memvault.urls`).

The optional capabilities are worked out once per store (:class:`Capabilities`):
without :class:`Searching`, the facade searches by scanning the full views
(:mod:`memvault.search`); without :class:`VectorStore`, a store cannot be opened
with an embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from memvault.errors import ConfigurationError
from memvault.messages import Record
from memvault.model import COMPACT_BATCH, CompactStats, Event, Progress, SessionInfo, Snapshot
from memvault.paging import Listed, PageQuery

Stored = tuple[int, str]
"""A stored message: its depth in the chain and its encoded envelope."""


@dataclass(frozen=True)
class Match:
    """A backend's answer to a search: one stored message and where it stands.

    Attributes:
        session_id: its session.
        depth: its depth (for errors naming it).
        body: the encoded message, as stored.
        position: its place in the full view (None: hidden).
        score: higher is better.
    """

    session_id: str
    depth: int
    body: str
    position: int | None
    score: float

    @property
    def hidden(self) -> bool:
        return self.position is None


class Write(NamedTuple):
    """Who writes, and when: the context of every write operation (a named tuple:
    every write makes one).

    Attributes:
        writer: the label the operation's event records.
        now: the time of the write (epoch seconds): the session's ``updated_at``,
            and what has expired by then is not there.
        ttl: the store handle's TTL in seconds (None: never expires).
    """

    writer: str
    now: float
    ttl: float | None

    @property
    def expires_at(self) -> float | None:
        """What every write sets the session's expiry to (sliding: ``now + ttl``)."""
        return None if self.ttl is None else self.now + self.ttl


class Backend(Protocol):
    """The synchronous backend protocol: one method per store operation, each one
    atomic (see the module's docstring for what every method is given and promises).

    A write (``w``) sets the session's ``updated_at`` to ``w.now`` and its expiry to
    ``w.expires_at``, for every key or row of the session in the same step, and
    records one :class:`~memvault.model.Event` (``writer``, ``at``, head and base
    before and after, ``detail``); a write to a session that is not live starts it
    afresh (what an expired one left is purged first). A write that changes nothing
    records nothing and keeps the version.
    """

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        """Chain ``records`` after the head, in order, all or none.

        Checked in this order, before anything is written: if every record's id is
        stored in the session already (visible or hidden), the call is a retry and
        writes nothing; some but not all stored: ``DuplicateMessageError``
        (:func:`~memvault.errors.duplicate_ids`); ``expect_version`` not the
        session's version (0 for a session that is not live): ``ConflictError``
        (:func:`~memvault.errors.version_conflict`); ``expect_message`` not stored
        in the session: ``ConflictError`` (:func:`~memvault.errors.not_stored`).

        Then the version is bumped and the event ``append`` records
        ``{"messages": len(records)}``. Records that carry a ``vector`` (a store
        with an embedder) have it stored too (:class:`VectorStore`), in the same
        step where the engine allows.

        Returns:
            The session's version after the append (a retry: its current version).
        """
        ...

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        """The visible messages, oldest first; ``last``: only the newest ``last``
        (None: all), in O(last) for the context view.

        ``full=False``: the context view (the newest summary, if some of its range is
        above base, then the messages after its range). ``full=True``: every message
        above base, each visible summary right after the message it was taken
        through, at that message's depth. The facade passes ``full`` only when it is
        True, so a backend without summaries serves every other read.

        Returns:
            ``[]`` for a session that is not live.

        Raises:
            CorruptRecordError: a node the pointers reach is missing or out of
                place (:func:`~memvault.errors.broken_chain`,
                :func:`~memvault.errors.message_missing`): never a shorter list.
        """
        ...

    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        """The messages of any state the event log or a snapshot points to: the chain
        ending at node ``head``, with depth above ``base`` (the newest ``last`` of
        them; None: all), oldest first, like ``history``. Reads only.

        Returns:
            ``[]`` for node 0 or a session that is not live; None if node ``head`` is
            not stored (compact deleted it): the facade then tells why.

        Raises:
            CorruptRecordError: the chain below ``head`` is broken.
        """
        ...

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        """The session's version, length, times and summarized count; None if it is
        not live. Reads only."""
        ...

    def pop(self, session_id: str, w: Write) -> Stored | None:
        """Hide the newest message of the context view and return it; when that is
        the summary (no message after it), undo the summary (the previous one, if
        any, is back). The event ``pop`` records ``{"message_id": id}`` or
        ``{"summary_id": id}``; the version is bumped.

        The message is decoded (:func:`~memvault.messages.decode_message`) before
        anything changes: one that cannot be returned raises ``CorruptRecordError``
        with nothing popped (a retry would pop a second message).

        Returns:
            The hidden message; None (and no change) if the context view is empty.
        """
        ...

    def summarize(
        self,
        session_id: str,
        record: Record,
        through: str,
        expect_version: int | None,
        w: Write,
    ) -> int:
        """Store ``record`` off the chain as the summary of the messages from the
        previous summary (or the start) through the message with id ``through``, and
        point the session at it; messages after ``through`` stay after it.

        Checked in this order: ``record.id`` stored already: a no-op if it is the
        current summary (a retry), else ``DuplicateMessageError``;
        ``expect_version``: ``ConflictError``; ``through`` not stored, not visible, or
        within the current summary's range: ``InvalidMessageError``
        (:func:`~memvault.errors.unknown_through`, ``hidden_through``,
        ``summarized_through``). The version is bumped; the event ``summarize``
        records ``{"summary_id", "through", "messages"}`` (messages folded in). A
        ``record.vector`` is stored as append stores one.

        Returns:
            The session's version after it.
        """
        ...

    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        """Hide all but the newest ``keep_last`` messages of the chain: base becomes
        ``max(base, depth(head) - keep_last)``. ``op`` is ``"trim"`` or ``"clear"``
        (``keep_last`` 0), the event's name; it records ``{"hidden": n}``. Hides
        the summary too once its range is at or below the new base.

        Returns:
            The version after it: unchanged, with no event, if nothing was hidden;
            0 for a session that is not live (nothing is written).
        """
        ...

    def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        """Save the current ``(head, base)``, version, length and summary pointer
        under ``name`` (the facade refused ``auto:`` names), in O(1). A session that
        is not live is started (an empty snapshot). The event ``snapshot`` records
        ``{"name": name}`` with the version unchanged.

        Raises:
            SnapshotExistsError: the name is taken (:func:`~memvault.errors.snapshot_exists`);
                a snapshot is never overwritten.
        """
        ...

    def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        """Every snapshot of the session in the order they were taken; ``[]`` if it is
        not live.

        Raises:
            CorruptRecordError: a snapshot whose pointers cannot be right
                (:func:`~memvault.model.check_snapshot`).
        """
        ...

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        """Restore snapshot ``name`` (``auto:`` names included): first save the
        current state as ``auto:pre-rollback@v{version}`` (``auto=True``), then set
        head, base and the summary pointer to the snapshot's. No snapshot is deleted
        or changed. The version is bumped; the event ``rollback`` records
        ``{"to": name, "saved": auto name}``.

        Returns:
            The auto-saved snapshot of the state it replaced.

        Raises:
            SnapshotNotFoundError: no such snapshot, or the session is not live.
            CorruptRecordError: the snapshot's pointers cannot be right.
        """
        ...

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        """Start session ``new_id`` with a copy of this session's full view (or of
        snapshot ``at``'s), and the summary its context view starts with, if any;
        snapshots and older summaries are not copied. ``new_id`` gets version 1 and
        the event ``fork`` recording ``{"from": session_id, "at": at}``. A source
        that is not live forks an empty session.

        Raises:
            ConflictError: ``new_id`` is live (:func:`~memvault.errors.session_exists`).
            SnapshotNotFoundError: ``at`` is not a snapshot of the session.
        """
        ...

    def log(self, session_id: str, now: float) -> list[Event]:
        """The session's events, oldest first (those ``compact`` kept); ``[]`` if it
        is not live."""
        ...

    def delete(self, session_id: str, now: float) -> bool:
        """Physically remove every node, snapshot and event of the session (its
        vectors stay until ``compact``), expired or not.

        Returns:
            True if it was live at ``now``; False if it did not exist or had
            expired (every read already answered that it did not exist).
        """
        ...

    def sessions(self, now: float) -> list[str]:
        """The ids of every live session, sorted."""
        ...

    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        """At most ``query.limit`` live sessions (:mod:`memvault.paging`): those whose
        id contains ``query.match``, in ``query.order`` (``descending``: reversed),
        ties by id, starting after the position ``query.after``; each with its
        :class:`~memvault.model.SessionInfo` and its key in that order
        (:func:`~memvault.paging.key_of`). The facade checked the query and makes
        the page and its cursor (:func:`~memvault.paging.page_of`)."""
        ...

    def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        """Delete sessions expired at ``now``, events beyond the newest
        ``keep_events`` per session (None: keep all), and nodes that no head,
        snapshot, summary pointer or kept event reaches. In steps of at most
        ``batch`` whole sessions, each one atomic step, calling ``progress`` (if
        given) with a :class:`~memvault.model.CompactProgress` after each; a step
        left undone by an interruption is done by the next compact.

        Returns:
            What was removed (``vectors`` 0: the facade reclaims the vectors after it).

        Raises:
            CorruptRecordError: a session's chain or snapshot is broken: nothing of
                that session is deleted (the steps before it stay done).
        """
        ...

    def close(self) -> None:
        """Release connections and files; the data stays. Every later call raises
        ``BackendUnavailableError("the store is closed")``."""
        ...


class Searching(Protocol):
    """The optional search primitive of a backend with a lexical index (memory's BM25
    index, SQLite's FTS5, PostgreSQL's postings)."""

    def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        """The ``k`` best matches of any of ``terms`` among the messages and
        summaries of the live sessions ``session_ids`` (None: every live session),
        best first. ``terms`` are distinct words as :func:`memvault.words.words`
        makes them (the index stores :func:`memvault.words.body_words` of each body),
        so no query reaches the engine's own query syntax; the facade checked that
        there is at least one and ``k``. A hidden message (position None) is a match
        only if ``include_hidden``; a session id that is not live matches nothing.

        Raises:
            CorruptRecordError: a matched message's session is damaged.
        """
        ...


class VectorStore(Protocol):
    """The optional store of search vectors (:mod:`memvault.vectors`), store-wide and
    keyed by a hash of their text: a backend with all of these methods can be opened
    with an embedder. A vector is a function of its text, so a key stored already is
    never stored again with another vector."""

    def vector_space(self) -> str | None:
        """The name of the embedder that made the stored vectors (its *space*); None
        if none is recorded."""
        ...

    def set_vector_space(self, space: str, reset: bool) -> None:
        """Record ``space``; ``reset``: delete every stored vector first (a store
        moving to another embedder)."""
        ...

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored vectors (little-endian float32 bytes) of those of ``keys`` that
        have one."""
        ...

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store ``(key, vector)`` pairs; a key stored already keeps its vector."""
        ...

    def vector_keys(self) -> list[str]:
        """The key of every stored vector."""
        ...

    def drop_vectors(self, keys: Sequence[str]) -> None:
        """Delete the vectors of ``keys`` (one not stored is skipped)."""
        ...

    def node_bodies(self, session_id: str, now: float) -> list[str]:
        """Every stored message and summary of a live session, hidden ones included,
        as stored, in any order (``[]`` if it is not live): what ``compact`` keeps
        the vectors of (:func:`memvault.vectors.reclaim`)."""
        ...


class AsyncBackend(Protocol):
    """The asynchronous backend protocol: :class:`Backend` with every method awaited
    (a native async driver: Redis, PostgreSQL). A call whose awaiter is cancelled
    must leave the store as a call that never started or one that completed."""

    async def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        """:meth:`Backend.append`, awaited."""
        ...

    async def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        """:meth:`Backend.history`, awaited."""
        ...

    async def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        """:meth:`Backend.chain`, awaited."""
        ...

    async def info(self, session_id: str, now: float) -> SessionInfo | None:
        """:meth:`Backend.info`, awaited."""
        ...

    async def pop(self, session_id: str, w: Write) -> Stored | None:
        """:meth:`Backend.pop`, awaited."""
        ...

    async def summarize(
        self,
        session_id: str,
        record: Record,
        through: str,
        expect_version: int | None,
        w: Write,
    ) -> int:
        """:meth:`Backend.summarize`, awaited."""
        ...

    async def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        """:meth:`Backend.trim`, awaited."""
        ...

    async def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        """:meth:`Backend.snapshot`, awaited."""
        ...

    async def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        """:meth:`Backend.snapshots`, awaited."""
        ...

    async def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        """:meth:`Backend.rollback`, awaited."""
        ...

    async def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        """:meth:`Backend.fork`, awaited."""
        ...

    async def log(self, session_id: str, now: float) -> list[Event]:
        """:meth:`Backend.log`, awaited."""
        ...

    async def delete(self, session_id: str, now: float) -> bool:
        """:meth:`Backend.delete`, awaited."""
        ...

    async def sessions(self, now: float) -> list[str]:
        """:meth:`Backend.sessions`, awaited."""
        ...

    async def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        """:meth:`Backend.sessions_page`, awaited."""
        ...

    async def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        """:meth:`Backend.compact`, awaited; ``progress`` is a plain (sync) callable."""
        ...

    async def close(self) -> None:
        """:meth:`Backend.close`, awaited."""
        ...


class AsyncSearching(Protocol):
    """:class:`Searching`, awaited."""

    async def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        """:meth:`Searching.search`, awaited."""
        ...


class AsyncVectorStore(Protocol):
    """:class:`VectorStore`, awaited."""

    async def vector_space(self) -> str | None:
        """:meth:`VectorStore.vector_space`, awaited."""
        ...

    async def set_vector_space(self, space: str, reset: bool) -> None:
        """:meth:`VectorStore.set_vector_space`, awaited."""
        ...

    async def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        """:meth:`VectorStore.get_vectors`, awaited."""
        ...

    async def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        """:meth:`VectorStore.put_vectors`, awaited."""
        ...

    async def vector_keys(self) -> list[str]:
        """:meth:`VectorStore.vector_keys`, awaited."""
        ...

    async def drop_vectors(self, keys: Sequence[str]) -> None:
        """:meth:`VectorStore.drop_vectors`, awaited."""
        ...

    async def node_bodies(self, session_id: str, now: float) -> list[str]:
        """:meth:`VectorStore.node_bodies`, awaited."""
        ...


def declared(protocol: type) -> tuple[str, ...]:
    """The methods a protocol class declares, in the order it declares them."""
    return tuple(
        name for name, value in vars(protocol).items() if callable(value) and name[0] != "_"
    )


PROTOCOL = declared(Backend)
"""The methods every backend has."""
SEARCHING = declared(Searching)
VECTOR_STORE = declared(VectorStore)


@dataclass(frozen=True)
class Capabilities:
    """What a backend has beyond :data:`PROTOCOL`, worked out once per store (a
    method looked up on every call would be looked up again and again).

    Attributes:
        backend: the backend's name, for the errors that say what it lacks.
        search: it has :class:`Searching`.
        vectors: it has every method of :class:`VectorStore`.
        lacking: the :class:`VectorStore` methods it lacks, when it has some of
            them (a half-written vector store is named as such).
    """

    backend: str
    search: bool = False
    vectors: bool = False
    lacking: tuple[str, ...] = ()

    @classmethod
    def of(cls, backend: object) -> Capabilities:
        """``backend``'s capabilities: its own ``capabilities`` if it states them (a
        wrapper does: :class:`~memvault.backends.threaded.ThreadedAsyncBackend`), else
        the capabilities' methods it has (sync or async)."""
        stated = getattr(backend, "capabilities", None)
        if isinstance(stated, Capabilities):
            return stated
        lacking = tuple(name for name in VECTOR_STORE if not hasattr(backend, name))
        return cls(
            type(backend).__name__,
            search=all(hasattr(backend, name) for name in SEARCHING),
            vectors=not lacking,
            lacking=() if len(lacking) == len(VECTOR_STORE) else lacking,
        )

    def require_vectors(self) -> None:
        """ConfigurationError unless the backend stores vectors (an embedder needs it)."""
        if self.vectors:
            return
        missing = f" (it lacks {', '.join(self.lacking)} of VectorStore)" if self.lacking else ""
        raise ConfigurationError(
            f"{self.backend} stores no vectors{missing}: semantic search "
            "(embedder=) is not supported on this backend"
        )


__all__ = [
    "PROTOCOL",
    "SEARCHING",
    "VECTOR_STORE",
    "AsyncBackend",
    "AsyncSearching",
    "AsyncVectorStore",
    "Backend",
    "Capabilities",
    "Match",
    "Searching",
    "Stored",
    "VectorStore",
    "Write",
    "declared",
]
