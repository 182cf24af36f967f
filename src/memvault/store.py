"""The synchronous facade: :func:`open`, :class:`Store` and :class:`Session`.

Everything that does no I/O (validation, encoding, decoding, the write context)
lives in :class:`Options` and is shared with the async facade in ``aio.py``.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, NoReturn, cast

from memvault.backends.base import (
    Backend,
    Capabilities,
    Searching,
    Stored,
    VectorStore,
    Write,
)
from memvault.embedders import as_embedder
from memvault.errors import (
    ConfigurationError,
    CorruptRecordError,
    InvalidMessageError,
    VersionNotFoundError,
)
from memvault.messages import (
    Message,
    MessageLike,
    Record,
    decode_message,
    encodable,
    encode_batch,
    encode_message,
)
from memvault.model import (
    COMPACT_BATCH,
    CompactStats,
    Event,
    Limits,
    Progress,
    SessionInfo,
    Snapshot,
    check_batch,
    check_count,
    check_message_id,
    check_seconds,
)
from memvault.paging import SessionPage, check_page, page_of
from memvault.sansio import drive
from memvault.search import Hit, check_query, check_sessions, hits, no_index, rank
from memvault.urls import open_backend, redact, resolve
from memvault.vectors import Index, depth, reclaim, request

_HOST = socket.gethostname()
_writer = f"{_HOST}:{os.getpid()}"
"""The default writer label, ``host:pid``; made once per process (every write reads it)."""


def _forked() -> None:
    global _writer
    _writer = f"{_HOST}:{os.getpid()}"


os.register_at_fork(after_in_child=_forked)
MAX_TTL = 100 * 365.25 * 86400
"""The longest ttl (100 years, in seconds): any later expiry could not be shown as a date."""


def refuse_pickling(self: object) -> NoReturn:
    """``__reduce__`` of a store or session: it holds open connections, which no other
    process can use."""
    raise TypeError(
        f"a memvault {type(self).__name__} cannot be pickled (it holds open connections): "
        "pass the store's URL and options to the other process and open it there"
    )


@dataclass(frozen=True)
class Options:
    """The store handle's own options, and what the sync and async facades share
    without I/O: checking arguments (``check_*``, ``encode``), decoding what the
    backend returns (``decode``), and the clock and writer of each call (``now``,
    ``write``).

    Attributes:
        url: the store URL (shown with its password redacted).
        ttl: seconds of inactivity after which a session expires (sliding; None: never).
        writer: the label recorded in the event log (default ``host:pid``).
        limits: input limits.
        embedder: what makes search vectors (see :func:`memvault.embedders.as_embedder`);
            None: lexical search only, and writes cost nothing more.
        index: the semantic side built on ``embedder`` (None without one).
    """

    url: str
    ttl: float | None = None
    writer: str | None = None
    limits: Limits = field(default_factory=Limits)
    embedder: Any = field(default=None, compare=False)
    index: Index | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        if self.embedder is not None:
            object.__setattr__(self, "index", Index(as_embedder(self.embedder)))
        if self.ttl is not None:
            check_seconds("ttl", self.ttl, at_most=MAX_TTL)
        if self.writer is not None and (
            not isinstance(self.writer, str) or not self.writer or not encodable(self.writer)
        ):
            raise ConfigurationError(
                f"writer must be a non-empty string of valid Unicode, not {self.writer!r}"
            )
        if not isinstance(self.limits, Limits):
            raise ConfigurationError("limits must be a memvault.Limits")

    def write(self) -> Write:
        """The context of one write: writer label, time, TTL."""
        return Write(self.writer or _writer, time.time(), self.ttl)

    @staticmethod
    def now() -> float:
        """The time of a read (epoch seconds): what has expired by then is not there."""
        return time.time()

    def encode(
        self,
        messages: Sequence[MessageLike],
        expect_version: int | None,
        expect_message: str | None = None,
    ) -> list[Record]:
        """Validate an append's arguments; raises before anything is written."""
        if expect_version is not None:
            check_count("expect_version", expect_version)
        if expect_message is not None:
            check_message_id("expect_message", expect_message)
        lim = self.limits
        return encode_batch(messages, lim.max_message_bytes, lim.max_batch, lim.max_batch_bytes)

    def check_summary(
        self, summary: MessageLike, through: object, expect_version: int | None
    ) -> tuple[Record, str]:
        """Validate summarize's arguments; raises before anything is written."""
        if expect_version is not None:
            check_count("expect_version", expect_version)
        if not isinstance(through, str) or not through:
            raise InvalidMessageError(
                f"through must be a message id (a non-empty string), not {through!r}"
            )
        if not isinstance(summary, (Message, dict)):
            raise InvalidMessageError(
                "summarize takes one message (a Message or a mapping of "
                f"its fields), not {type(summary).__name__}"
            )
        return encode_message(summary, self.limits.max_message_bytes), through

    @staticmethod
    def read_args(last: int | None, full: bool, now: float) -> tuple[Any, ...]:
        """history()'s backend arguments after ``session_id`` (``last`` checked);
        ``full`` only when asked, so a backend without summaries serves the rest."""
        return (last, now, True) if full else (last, now)

    @staticmethod
    def decode(session_id: str, stored: list[Stored]) -> list[Message]:
        return [decode_message(session_id, depth, body) for depth, body in stored]

    @staticmethod
    def check_last(last: int | None) -> int | None:
        """``last=`` if valid (None or a count), else InvalidArgumentError."""
        return None if last is None else check_count("last", last)

    def check_snapshot_name(self, name: str, *, user: bool = True) -> str:
        """``name`` if valid under the limits (``user``: not an ``auto:`` name)."""
        return self.limits.check_snapshot_name(name, user=user)

    @staticmethod
    def state_at(events: list[Event], version: int) -> tuple[int, int] | None:
        """The ``(head, base)`` right after ``version``, from the event log; None if no
        kept event records it. Version 0 is the empty history before the first write."""
        if version == 0:
            return 0, 0
        for event in reversed(events):  # a snapshot's event repeats its version: same state
            if event.version == version:
                return event.head_after, event.base_after
        return None

    @classmethod
    def version_missing(
        cls,
        session_id: str,
        version: int,
        state: tuple[int, int] | None,
        events: list[Event],
        info: SessionInfo | None,
    ) -> VersionNotFoundError | CorruptRecordError:
        """Why ``history(at_version=version)`` has nothing to show. ``state``: the
        version's pointers in the log read first (None: not there); ``events`` and
        ``info``: read again after the chain came back empty-handed. A version whose
        event is still kept has its head node too (compact keeps what a kept event
        reaches), so a head missing under the same event is damage; an event gone by
        the second read was dropped by a concurrent compact."""
        if state is not None and cls.state_at(events, version) == state:
            return CorruptRecordError(
                session_id,
                None,
                f"the head of version {version} (node {state[0]}) is "
                "missing, though its event is in the log",
            )
        current = info.version if info else 0
        if version > current:
            return VersionNotFoundError(
                f"session {session_id!r} is at version {current}; version {version} does not exist"
            )
        oldest = f"the oldest kept is {events[0].version}" if events else "none is kept"
        return VersionNotFoundError(
            f"session {session_id!r}: version {version} is no longer in the event log "
            f"(compact(keep_events=...) dropped it; {oldest})"
        )


def split_options(url: str | None, options: dict[str, Any]) -> tuple[Options, dict[str, Any]]:
    """Separate the handle's options from the backend's."""
    own = {k: options.pop(k) for k in ("ttl", "writer", "limits", "embedder") if k in options}
    return Options(resolve(url), **own), options


class Session:
    """A handle on one conversation; creating it writes nothing.

    Args:
        store: the store it belongs to.
        session_id: any non-empty string up to ``limits.max_session_id`` characters.
    """

    __reduce__ = refuse_pickling

    def __init__(self, store: Store, session_id: str) -> None:
        self._opts = store.options
        self.id = self._opts.limits.check_session_id(session_id)
        self._backend = store.backend
        self._store = store

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def append(
        self,
        messages: Sequence[MessageLike],
        *,
        expect_version: int | None = None,
        expect_message: str | None = None,
    ) -> int:
        """Append messages atomically, in order, after the current head.

        Args:
            messages: Messages (or mappings of their fields); 1 to ``max_batch``.
            expect_version: compare-and-set: raise ConflictError unless the session is
                at this version (0 for a session that does not exist yet).
            expect_message: compare-and-set: raise ConflictError unless the session
                stores a message of this id (visible or hidden). Unlike a version, an
                id tells a session deleted and made again from the one it was.

        Returns:
            The session's version after the append. A batch whose ids are all stored
            already is a no-op and returns the current version.

        Raises:
            InvalidMessageError: bad input; nothing was written.
            DuplicateMessageError: the batch mixes stored and new ids.
            ConflictError: ``expect_version`` did not match, or ``expect_message`` is not
                stored (checked in that order, after the ids).
        """
        records = self._store.embedded(
            self.id, self._opts.encode(messages, expect_version, expect_message)
        )
        return self._backend.append(
            self.id, records, expect_version, expect_message, self._opts.write()
        )

    def history(
        self, last: int | None = None, *, full: bool = False, at_version: int | None = None
    ) -> list[Message]:
        """The visible messages, oldest first; ``last=N`` reads only the newest N.

        Args:
            last: only the newest N (O(N) in the context view, whatever the size).
            full: False (default): the context view, what an agent sends to its model:
                the newest summary, then the messages after the range it stands for.
                True: every visible message, summarized ones included, with each
                summary right after the message it was taken through.
            at_version: the history as it was right after version ``at_version``
                (0: empty), rebuilt from the event log's pointers; hidden messages
                are never destroyed, so any logged version can be shown. The log
                records head and base only, so this is the full view of that version
                without its summaries.

        Raises:
            CorruptRecordError: a stored message cannot be decoded, or the head of
                ``at_version`` is missing though its event is kept.
            VersionNotFoundError: the session never reached ``at_version``, or
                ``compact(keep_events=...)`` dropped its event.
        """
        last = self._opts.check_last(last)
        if at_version is None:
            return self._opts.decode(
                self.id,
                self._backend.history(self.id, *self._opts.read_args(last, full, self._opts.now())),
            )
        check_count("at_version", at_version)
        events = self.log()
        state = self._opts.state_at(events, at_version)
        stored = (
            None if state is None else self._backend.chain(self.id, *state, last, self._opts.now())
        )
        if stored is None:
            raise self._opts.version_missing(self.id, at_version, state, self.log(), self.info())
        return self._opts.decode(self.id, stored)

    def summarize(
        self, summary: MessageLike, *, through: str, expect_version: int | None = None
    ) -> int:
        """Let ``summary`` stand for the messages from the previous summary (or the
        start) through the message with id ``through``, in one atomic step.

        The summary is stored off the chain and the session points at it: the
        originals stay stored and readable (``history(full=True)``, snapshots, fork),
        and messages appended after ``through`` (say, while the summarizing model
        ran) stay after the summary: nothing written concurrently is lost. The
        version bumps and the log records ``summarize``. A snapshot saves the summary
        pointer, so rolling back to before a summary undoes it; ``pop`` with nothing
        after the summary undoes it too (the previous summary is back); ``trim`` or
        ``clear`` past ``through`` hides it with its range; ``fork`` copies the
        summary the context view starts with; ``compact`` keeps the originals.

        Args:
            summary: the summary message; its id must be new to the session (a retry
                of the current summary, same id, is a no-op).
            through: id of the last message it stands for: a visible message after
                the current summary's range.
            expect_version: compare-and-set, as for :meth:`append`: pass the version
                the summarized history was read at.

        Returns:
            The session's version after the summary.

        Raises:
            InvalidMessageError: bad summary, or ``through`` unknown, not visible, or
                already summarized; nothing was written.
            DuplicateMessageError: the summary's id is another stored message's.
            ConflictError: ``expect_version`` did not match.
        """
        record, through = self._opts.check_summary(summary, through, expect_version)
        (record,) = self._store.embedded(self.id, [record])
        return self._backend.summarize(self.id, record, through, expect_version, self._opts.write())

    def info(self) -> SessionInfo | None:
        """The session's version, length and timestamps; None if it does not exist."""
        return self._backend.info(self.id, self._opts.now())

    def pop(self) -> Message | None:
        """Hide the newest message of the context view and return it; None (and no
        change) if empty. If that is a summary, the summary is undone."""
        stored = self._backend.pop(self.id, self._opts.write())
        return self._opts.decode(self.id, [stored])[0] if stored else None

    def trim(self, keep_last: int) -> int:
        """Hide all but the newest ``keep_last`` messages; returns the version."""
        return self._backend.trim(
            self.id, check_count("keep_last", keep_last), "trim", self._opts.write()
        )

    def clear(self) -> int:
        """Hide every message (they stay reachable from snapshots); returns the version."""
        return self._backend.trim(self.id, 0, "clear", self._opts.write())

    def snapshot(self, name: str) -> Snapshot:
        """Save the current history under ``name``, in O(1).

        Raises:
            SnapshotExistsError: the name is taken; snapshots are never overwritten.
            InvalidMessageError: an empty, over-long or ``auto:`` name.
        """
        name = self._opts.check_snapshot_name(name)
        return self._backend.snapshot(self.id, name, self._opts.write())

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot of the session, oldest first."""
        return self._backend.snapshots(self.id, self._opts.now())

    def rollback(self, name: str) -> Snapshot:
        """Restore the history saved as ``name``.

        The replaced state is saved first as ``auto:pre-rollback@v{version}``, so a
        rollback is undone by rolling back to that snapshot. No snapshot is deleted.

        Returns:
            The auto-saved snapshot of the replaced state.
        """
        return self._backend.rollback(
            self.id, self._opts.check_snapshot_name(name, user=False), self._opts.write()
        )

    def fork(self, new_id: str, *, at: str | None = None) -> Session:
        """Start session ``new_id`` from this history (or from snapshot ``at``).

        Raises:
            ConflictError: ``new_id`` already exists.
        """
        new = Session(self._store, new_id)
        at = None if at is None else self._opts.check_snapshot_name(at, user=False)
        self._backend.fork(self.id, new.id, at, self._opts.write())
        return new

    def log(self) -> list[Event]:
        """The operation log, oldest first: who changed what, and when."""
        return self._backend.log(self.id, self._opts.now())

    def search(self, query: str, k: int = 10, *, include_hidden: bool = False) -> list[Hit]:
        """The ``k`` messages of the full view (summaries included) that best match
        ``query``, best first (see :mod:`memvault.search` and ``docs/recall.md``).

        Args:
            query: words; anything else in it (quotes, operators) only separates them.
            k: at most this many hits.
            include_hidden: also find hidden messages (popped, trimmed, cleared,
                rolled back); their hits have ``hidden=True`` and no position.

        Raises:
            InvalidArgumentError: a query with no word, or a bad ``k``.
            ConfigurationError: ``include_hidden`` on a backend with no search index.
        """
        return self._store.search(query, k, [self.id], include_hidden=include_hidden)

    def delete(self) -> bool:
        """Physically remove every message, snapshot and event of the session.

        Returns:
            True if the session existed and had not expired; an expired session's
            leftovers are removed too, and the answer is False, as every read already
            answered that it did not exist.
        """
        return self._backend.delete(self.id, self._opts.now())


# aio.AsyncStore is this class's async twin, method for method: the two stay thin
# (all logic is in Options and the backend), so only their shape repeats.
class Store:
    """An open store. Use as a context manager, or call :meth:`close`."""

    __reduce__ = refuse_pickling

    def __init__(self, backend: Backend, options: Options) -> None:
        self.backend = backend
        self.options = options

    @functools.cached_property
    def capabilities(self) -> Capabilities:
        """What the backend has beyond the protocol, worked out once."""
        return Capabilities.of(self.backend)

    def searching(self) -> Searching | None:
        """The backend's lexical index, if it has one."""
        return cast(Searching, self.backend) if self.capabilities.search else None

    def vector_store(self) -> VectorStore:
        """The backend as a vector store; ConfigurationError if it is not one."""
        self.capabilities.require_vectors()
        return cast(VectorStore, self.backend)

    def __repr__(self) -> str:
        return f"Store({redact(self.options.url)!r})"

    def vectors(self) -> Index | None:
        """The semantic index, checked against the store's vectors on first use
        (ConfigurationError if another embedder made them); None without an embedder.
        Reading only, it writes nothing (a read-only store can be searched)."""
        index = self.options.index
        if index is not None and not index.checked:
            index.check_space(self.vector_store().vector_space())
        return index

    def claimed(self) -> Index | None:
        """:meth:`vectors`, before a write: the embedder recorded if the store has none."""
        index = self.vectors()
        if index is not None and index.unclaimed:
            self.vector_store().set_vector_space(index.space, False)
            index.unclaimed = False
        return index

    def embedded(self, session_id: str, records: list[Record]) -> list[Record]:
        """``records`` with their vectors, embedded before anything is written."""
        index = self.claimed()
        if index is None:
            return records
        texts = index.texts_of(session_id, records)
        return index.attach(records, texts, index.embedder.embed(texts))

    def recall(
        self,
        query: str,
        terms: list[str],
        ids: list[str] | None,
        k: int,
        include_hidden: bool = False,
    ) -> list[Hit]:
        """The ``k`` best hits among sessions ``ids`` (None: every live one): from the
        backend's lexical index (or a scan of the full views without one), fused with
        cosine similarity when the store has an embedder."""
        vectors = self.vectors()
        lexical = self.searching()
        if vectors is None and lexical is not None:
            return hits(lexical.search(ids, terms, k, bool(include_hidden), self.options.now()))
        if include_hidden:
            raise no_index(self.capabilities.backend, vectors is not None)
        ids = self.sessions() if ids is None else ids
        if vectors is None:
            return rank(terms, [(sid, self.session(sid).history(full=True)) for sid in ids], k)
        read = self.options.read_args(None, True, self.options.now())
        views = [(sid, self.backend.history(sid, *read)) for sid in ids]
        found = (
            hits(lexical.search(ids, terms, depth(k), False, self.options.now()))
            if lexical is not None
            else rank(terms, [(sid, self.options.decode(sid, v)) for sid, v in views], depth(k))
        )
        docs = vectors.docs(views)
        vectors.remember(self.vector_store().get_vectors(vectors.unknown(docs)))
        texts = vectors.to_embed(query, docs)
        return vectors.rank(texts, vectors.embedder.embed(texts), docs, found, k)

    def session(self, session_id: str) -> Session:
        """A handle on session ``session_id``; nothing is written."""
        return Session(self, session_id)

    def sessions(self) -> list[str]:
        """Ids of the live (unexpired) sessions, sorted: all of them in one list (its
        cost grows with the store). :meth:`sessions_page` lists them a page at a time."""
        return self.backend.sessions(self.options.now())

    def sessions_page(
        self,
        limit: int = 100,
        *,
        cursor: str | None = None,
        order: str = "id",
        descending: bool = False,
        match: str | None = None,
    ) -> SessionPage:
        """One page of the live sessions, with their info, and the cursor to the next.

        A page costs about the same however many sessions the store holds (SQLite,
        PostgreSQL and Redis keep an index per order; the memory and JSON-file stores
        sort in Python). Paging is by position, not offset: a session that exists
        throughout a walk and whose key does not change meanwhile is listed exactly
        once, whatever is inserted or deleted meanwhile (a session written during a
        walk ordered by version, length, updated or expires may move).

        Args:
            limit: sessions per page, 1 to 10,000.
            cursor: the previous page's ``cursor`` (None: the first page). It must be
                passed with the same ``order``, ``descending`` and ``match``.
            order: ``"id"``, ``"version"``, ``"length"``, ``"updated"`` or ``"expires"``
                (sessions that never expire come after every date), then by id.
            descending: the order reversed.
            match: only ids that contain this text (case-sensitive). A filter that
                matches few sessions makes a page read further.

        Returns:
            The page: ``sessions`` (``SessionInfo``s) and ``cursor`` (None after the
            last page).

        Raises:
            InvalidArgumentError: a bad limit, order, match or cursor; nothing was read.
        """
        query = check_page(limit, cursor, order, descending, match)
        return page_of(query, self.backend.sessions_page(query, self.options.now()))

    def search(
        self,
        query: str,
        k: int = 10,
        sessions: Sequence[str] | None = None,
        *,
        include_hidden: bool = False,
    ) -> list[Hit]:
        """:meth:`Session.search` across ``sessions`` (default: every live one), ranked
        together."""
        terms, k = check_query(query, k)
        ids = None if sessions is None else check_sessions(sessions)
        return self.recall(query, terms, ids, k, include_hidden)

    def compact(
        self,
        keep_events: int | None = None,
        *,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        """Delete expired sessions, events beyond the newest ``keep_events`` per
        session, and messages no head, snapshot or kept event reaches; then the
        search vectors no stored message or summary uses any more
        (:func:`memvault.vectors.reclaim`: it reads every stored message once).

        It runs in steps, each one short atomic step over at most ``batch`` whole
        sessions (Redis: one session), so concurrent writers are never held up for
        long and a reader at any moment sees every session whole. Interrupted (even
        killed), it keeps the steps it finished and leaves the rest untouched; the
        next compact finishes the job. See docs/compact.md.

        Args:
            keep_events: events to keep per session (default: all).
            batch: sessions per step (and, on Redis, between progress calls).
            progress: called after each step with a :class:`CompactProgress`.

        Raises:
            CorruptRecordError: a session's chain is broken; nothing of that session
                is deleted (the steps before it stay done).
        """
        if keep_events is not None:
            check_count("keep_events", keep_events)
        check_batch(batch)
        now = self.options.now()
        stats = self.backend.compact(keep_events, now, batch, progress)
        if not self.capabilities.vectors:
            return stats
        return replace(stats, vectors=drive(reclaim(now), request(self.backend)))

    def close(self) -> None:
        """Release connections. The data stays."""
        self.backend.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open(url: str | None = None, **options: Any) -> Store:  # noqa: A001 - the public name
    """Open a store.

    Args:
        url: ``memory://``, ``sqlite:///relative.db``, ``sqlite:////abs/path.db``,
            ``redis://…``, ``rediss://…``, ``postgresql://…``. Default:
            ``$MEMVAULT_URL``, else ``sqlite:///memvault.db``.
        **options: ``ttl``, ``writer``, ``limits``, ``embedder`` (semantic and hybrid
            search: ``"wordllama"``, an Embedder or a callable; see
            :mod:`memvault.embedders`), and the backend's own options (SQLite:
            ``durability``, ``busy_timeout``).

    Raises:
        ConfigurationError: bad URL or option, or a missing optional dependency.
    """
    return open_store(url, options)


def open_store(url: str | None, options: dict[str, Any], module: Any = None) -> Store:
    """:func:`open`, with ``module`` (an object with ``open_backend(url, **options)``, as
    a URL scheme names) in place of the backend the URL's scheme names, if given."""
    opts, backend_options = split_options(url, options)
    store = Store(open_backend(opts.url, backend_options, module), opts)
    try:
        store.vectors()
    except BaseException:
        store.close()
        raise
    return store


__all__ = ["Options", "Session", "Store", "open"]
