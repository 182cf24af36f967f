"""The synchronous facade: :func:`open`, :class:`Store` and :class:`Session`.

Every method is one line: it drives one of the operations of
:mod:`memvault.operations`, which both faces share (they hold all the logic:
checking, encoding, decoding, search, compact), performing each request with a
plain call. The async facade (:mod:`memvault.aio`) awaits the same requests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar

from memvault.backends.base import Backend, Capabilities
from memvault.messages import Message, MessageLike
from memvault.model import COMPACT_BATCH, CompactStats, Event, Progress, SessionInfo, Snapshot
from memvault.operations import (
    Embed,
    Op,
    Operations,
    Options,
    Request,
    refuse_pickling,
    split_options,
)
from memvault.paging import SessionPage
from memvault.sansio import drive
from memvault.search import Hit
from memvault.urls import open_backend, redact

T = TypeVar("T")


def now() -> float:
    """The facade's clock (epoch seconds): every read and write takes its time here."""
    return time.time()


class Session:
    """A handle on one conversation; creating it writes nothing.

    Args:
        store: the store it belongs to.
        session_id: any non-empty string up to ``limits.max_session_id`` characters.
    """

    __reduce__ = refuse_pickling

    def __init__(self, store: Store, session_id: str) -> None:
        self.id = store.ops.session_id(session_id)
        self._store, self._ops, self._run = store, store.ops, store.run

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
        return self._run(self._ops.append(self.id, messages, expect_version, expect_message))

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
        return self._run(self._ops.history(self.id, last, full, at_version))

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
        return self._run(self._ops.summarize(self.id, summary, through, expect_version))

    def info(self) -> SessionInfo | None:
        """The session's version, length and timestamps; None if it does not exist."""
        return self._run(self._ops.info(self.id))

    def pop(self) -> Message | None:
        """Hide the newest message of the context view and return it; None (and no
        change) if empty. If that is a summary, the summary is undone."""
        return self._run(self._ops.pop(self.id))

    def trim(self, keep_last: int) -> int:
        """Hide all but the newest ``keep_last`` messages; returns the version."""
        return self._run(self._ops.trim(self.id, keep_last))

    def clear(self) -> int:
        """Hide every message (they stay reachable from snapshots); returns the version."""
        return self._run(self._ops.trim(self.id, 0, "clear"))

    def snapshot(self, name: str) -> Snapshot:
        """Save the current history under ``name``, in O(1).

        Raises:
            SnapshotExistsError: the name is taken; snapshots are never overwritten.
            InvalidMessageError: an empty, over-long or ``auto:`` name.
        """
        return self._run(self._ops.snapshot(self.id, name))

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot of the session, oldest first."""
        return self._run(self._ops.snapshots(self.id))

    def rollback(self, name: str) -> Snapshot:
        """Restore the history saved as ``name``.

        The replaced state is saved first as ``auto:pre-rollback@v{version}``, so a
        rollback is undone by rolling back to that snapshot. No snapshot is deleted.

        Returns:
            The auto-saved snapshot of the replaced state.
        """
        return self._run(self._ops.rollback(self.id, name))

    def fork(self, new_id: str, *, at: str | None = None) -> Session:
        """Start session ``new_id`` from this history (or from snapshot ``at``).

        Raises:
            ConflictError: ``new_id`` already exists.
        """
        return Session(self._store, self._run(self._ops.fork(self.id, new_id, at)))

    def log(self) -> list[Event]:
        """The operation log, oldest first: who changed what, and when."""
        return self._run(self._ops.log(self.id))

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
        return self._run(self._ops.search(query, k, [self.id], include_hidden))

    def delete(self) -> bool:
        """Physically remove every message, snapshot and event of the session.

        Returns:
            True if the session existed and had not expired; an expired session's
            leftovers are removed too, and the answer is False, as every read already
            answered that it did not exist.
        """
        return self._run(self._ops.delete(self.id))


# aio.AsyncStore is this class's async twin, method for method: each method of both
# drives one operation of memvault.operations, so only their shape repeats.
class Store:
    """An open store. Use as a context manager, or call :meth:`close`.

    Attributes:
        backend: the backend (:class:`~memvault.backends.base.Backend`).
        options: the handle's settings.
        capabilities: what the backend has beyond the protocol, worked out when the
            store is opened.
        ops: the operations its methods drive.
    """

    __reduce__ = refuse_pickling

    def __init__(self, backend: Backend, options: Options) -> None:
        self.backend = backend
        self.options = options
        self.capabilities = Capabilities.of(backend)
        self.ops = Operations(options, self.capabilities, now)

    def __repr__(self) -> str:
        return f"Store({redact(self.options.url)!r})"

    def run(self, operation: Op[T]) -> T:
        """Run one of :attr:`ops`' operations, each request a call."""
        return drive(operation, self._perform)

    def _perform(self, request: Request) -> Any:
        if isinstance(request, Embed):
            return request.embedder.embed(request.texts)
        return getattr(self.backend, request[0])(*request[1:])

    def session(self, session_id: str) -> Session:
        """A handle on session ``session_id``; nothing is written."""
        return Session(self, session_id)

    def sessions(self) -> list[str]:
        """Ids of the live (unexpired) sessions, sorted: all of them in one list (its
        cost grows with the store). :meth:`sessions_page` lists them a page at a time."""
        return self.run(self.ops.sessions())

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
        return self.run(self.ops.sessions_page(limit, cursor, order, descending, match))

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
        return self.run(self.ops.search(query, k, sessions, include_hidden))

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
        return self.run(self.ops.compact(keep_events, batch, progress))

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
        store.run(store.ops.vectors())
    except BaseException:
        store.close()
        raise
    return store


__all__ = ["Options", "Session", "Store", "open"]
