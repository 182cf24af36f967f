"""What the sync and async facades share: a store handle's settings (:class:`Options`)
and its operations, written once and without I/O (:class:`Operations`).

Each operation is a generator (:mod:`memvault.sansio`): it checks its arguments
first (raising before any request, so nothing is written), yields requests, is sent
each one's reply, and returns the result. A request is either a backend call,
``(method, *args)``: a method of the backend protocol or of its capabilities
(:mod:`memvault.backends.base`) and its arguments; or :class:`Embed`. A
:class:`memvault.Store` performs each request with a call, a
:class:`memvault.AsyncStore` awaits it: that is all the two faces do differently.

The clock is the facade's (``clock``, read for every read and write): a backend
never reads the time.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn, TypeVar

from memvault.backends.base import Capabilities, Write
from memvault.embedders import Embedder, as_embedder
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
    decode_all,
    decode_message,
    encodable,
    encode_batch,
    encode_message,
)
from memvault.model import (
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
from memvault.search import Hit, check_query, check_sessions, hits, no_index, rank
from memvault.urls import resolve
from memvault.vectors import Index, depth, reclaim

T = TypeVar("T")

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
    """A store handle's own settings, checked when it is opened.

    Attributes:
        url: the store URL (shown with its password redacted).
        ttl: seconds of inactivity after which a session expires (sliding; None: never).
        writer: the label recorded in the event log (None: ``host:pid``).
        limits: input limits.
        embedder: what makes search vectors, as :func:`memvault.embedders.as_embedder`
            makes it of what was given; None: lexical search only, and writes cost
            nothing more.
    """

    url: str
    ttl: float | None = None
    writer: str | None = None
    limits: Limits = field(default_factory=Limits)
    embedder: Embedder | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.embedder is not None:
            object.__setattr__(self, "embedder", as_embedder(self.embedder))
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


def split_options(url: str | None, options: dict[str, Any]) -> tuple[Options, dict[str, Any]]:
    """Separate the handle's settings from the backend's options."""
    own = {k: options.pop(k) for k in ("ttl", "writer", "limits", "embedder") if k in options}
    return Options(resolve(url), **own), options


@dataclass(frozen=True)
class Embed:
    """Request: ``embedder``'s vectors for ``texts`` (its ``embed``, or ``aembed``
    awaited: :func:`memvault.embedders.aembed`)."""

    embedder: Embedder
    texts: list[str]


Request = tuple[Any, ...] | Embed
Op = Generator[Request, Any, T]
"""An operation of the facade: run by :func:`memvault.sansio.drive` (or ``drive_async``)."""


class Operations:
    """Every operation of a store handle and its sessions, as a generator.

    Args:
        options: the handle's settings.
        capabilities: what its backend has beyond the protocol.
        clock: the time of each read and write (epoch seconds).

    Attributes:
        index: the semantic side built on ``options.embedder`` (None without one): the
            vectors read so far, and whether the store's were checked.
    """

    def __init__(
        self, options: Options, capabilities: Capabilities, clock: Callable[[], float]
    ) -> None:
        self.options = options
        self.limits = options.limits
        self.capabilities = capabilities
        self.index = None if options.embedder is None else Index(options.embedder)
        self._clock = clock

    def now(self) -> float:
        """The time of a read: what has expired by then is not there."""
        return self._clock()

    def write(self) -> Write:
        """The context of one write: writer label, time, TTL."""
        return Write(self.options.writer or _writer, self._clock(), self.options.ttl)

    def session_id(self, session_id: object) -> str:
        """``session_id`` if it is valid under the limits, else InvalidMessageError."""
        return self.limits.check_session_id(session_id)

    # Sessions.
    def append(
        self,
        session_id: str,
        messages: Sequence[MessageLike],
        expect_version: int | None,
        expect_message: str | None,
    ) -> Op[int]:
        if expect_version is not None:
            check_count("expect_version", expect_version)
        if expect_message is not None:
            check_message_id("expect_message", expect_message)
        lim = self.limits
        records = encode_batch(messages, lim.max_message_bytes, lim.max_batch, lim.max_batch_bytes)
        records = yield from self._embedded(session_id, records)
        version: int = yield (
            "append",
            session_id,
            records,
            expect_version,
            expect_message,
            self.write(),
        )
        return version

    def history(
        self, session_id: str, last: int | None, full: bool, at_version: int | None
    ) -> Op[list[Message]]:
        """The context or full view; ``at_version``: the full view of that version,
        rebuilt from the event log's pointers (see :meth:`memvault.Session.history`)."""
        if last is not None:
            check_count("last", last)
        if at_version is not None:
            return (yield from self._history_at(session_id, at_version, last))
        # ``full`` is passed only when True, so a backend without summaries serves the rest
        read = (session_id, last, self.now(), True) if full else (session_id, last, self.now())
        return decode_all(session_id, (yield ("history", *read)))

    def _history_at(self, session_id: str, version: int, last: int | None) -> Op[list[Message]]:
        check_count("at_version", version)
        events = yield ("log", session_id, self.now())
        state = state_at(events, version)
        stored = None if state is None else (yield ("chain", session_id, *state, last, self.now()))
        if stored is None:
            events = yield ("log", session_id, self.now())
            info = yield ("info", session_id, self.now())
            raise version_missing(session_id, version, state, events, info)
        return decode_all(session_id, stored)

    def summarize(
        self, session_id: str, summary: MessageLike, through: object, expect_version: int | None
    ) -> Op[int]:
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
        record = encode_message(summary, self.limits.max_message_bytes)
        (record,) = yield from self._embedded(session_id, [record])
        version: int = yield (
            "summarize",
            session_id,
            record,
            through,
            expect_version,
            self.write(),
        )
        return version

    def info(self, session_id: str) -> Op[SessionInfo | None]:
        info: SessionInfo | None = yield ("info", session_id, self.now())
        return info

    def pop(self, session_id: str) -> Op[Message | None]:
        stored = yield ("pop", session_id, self.write())
        return None if stored is None else decode_message(session_id, *stored)

    def trim(self, session_id: str, keep_last: int, op: str = "trim") -> Op[int]:
        """``trim`` (``clear``: ``keep_last`` 0, logged as ``clear``)."""
        keep_last = check_count("keep_last", keep_last)
        version: int = yield ("trim", session_id, keep_last, op, self.write())
        return version

    def snapshot(self, session_id: str, name: str) -> Op[Snapshot]:
        name = self.limits.check_snapshot_name(name)
        snapshot: Snapshot = yield ("snapshot", session_id, name, self.write())
        return snapshot

    def snapshots(self, session_id: str) -> Op[list[Snapshot]]:
        snapshots: list[Snapshot] = yield ("snapshots", session_id, self.now())
        return snapshots

    def rollback(self, session_id: str, name: str) -> Op[Snapshot]:
        name = self.limits.check_snapshot_name(name, user=False)
        saved: Snapshot = yield ("rollback", session_id, name, self.write())
        return saved

    def fork(self, session_id: str, new_id: str, at: str | None) -> Op[str]:
        """Returns ``new_id``, checked."""
        new_id = self.session_id(new_id)
        at = None if at is None else self.limits.check_snapshot_name(at, user=False)
        yield ("fork", session_id, new_id, at, self.write())
        return new_id

    def log(self, session_id: str) -> Op[list[Event]]:
        events: list[Event] = yield ("log", session_id, self.now())
        return events

    def delete(self, session_id: str) -> Op[bool]:
        existed: bool = yield ("delete", session_id, self.now())
        return existed

    # The store.
    def sessions(self) -> Op[list[str]]:
        ids: list[str] = yield ("sessions", self.now())
        return ids

    def sessions_page(
        self, limit: int, cursor: str | None, order: str, descending: bool, match: str | None
    ) -> Op[SessionPage]:
        query = check_page(limit, cursor, order, descending, match)
        return page_of(query, (yield ("sessions_page", query, self.now())))

    def search(
        self, query: str, k: int, sessions: Sequence[str] | None, include_hidden: bool
    ) -> Op[list[Hit]]:
        """The ``k`` best hits among ``sessions`` (None: every live one): from the
        backend's lexical index (or a scan of the full views without one), fused with
        cosine similarity when the store has an embedder."""
        terms, k = check_query(query, k)
        ids = None if sessions is None else check_sessions(sessions)
        vectors = yield from self.vectors()
        lexical = self.capabilities.search
        if vectors is None and lexical:
            return hits((yield ("search", ids, terms, k, bool(include_hidden), self.now())))
        if include_hidden:
            raise no_index(self.capabilities.backend, vectors is not None)
        if ids is None:
            ids = yield ("sessions", self.now())
        if vectors is None:
            views = []
            for sid in ids:
                view = yield from self.history(self.session_id(sid), None, True, None)
                views.append((sid, view))
            return rank(terms, views, k)
        now = self.now()
        stored = []
        for sid in ids:
            stored.append((sid, (yield ("history", sid, None, now, True))))
        found = (
            hits((yield ("search", ids, terms, depth(k), False, self.now())))
            if lexical
            else rank(terms, [(sid, decode_all(sid, v)) for sid, v in stored], depth(k))
        )
        docs = vectors.docs(stored)
        vectors.remember((yield ("get_vectors", vectors.unknown(docs))))
        texts = vectors.to_embed(query, docs)
        return vectors.rank(texts, (yield Embed(vectors.embedder, texts)), docs, found, k)

    def compact(
        self, keep_events: int | None, batch: int, progress: Progress | None
    ) -> Op[CompactStats]:
        """The backend's compact, then the vectors no stored message uses any more."""
        if keep_events is not None:
            check_count("keep_events", keep_events)
        check_batch(batch)
        now = self.now()
        stats: CompactStats = yield ("compact", keep_events, now, batch, progress)
        if not self.capabilities.vectors:
            return stats
        return replace(stats, vectors=(yield from reclaim(now)))

    # The semantic index.
    def vectors(self) -> Op[Index | None]:
        """The semantic index, checked against the store's vectors on first use
        (ConfigurationError if another embedder made them); None without an embedder.
        It writes nothing (a read-only store can be searched)."""
        index = self.index
        if index is not None and not index.checked:
            self.capabilities.require_vectors()
            index.check_space((yield ("vector_space",)))
        return index

    def claimed(self) -> Op[Index | None]:
        """:meth:`vectors`, before a write: the embedder recorded if the store has none."""
        index = yield from self.vectors()
        if index is not None and index.unclaimed:
            yield ("set_vector_space", index.space, False)
            index.unclaimed = False
        return index

    def _embedded(self, session_id: str, records: list[Record]) -> Op[list[Record]]:
        """``records`` with their vectors, embedded before anything is written."""
        index = yield from self.claimed()
        if index is None:
            return records
        texts = index.texts_of(session_id, records)
        return index.attach(records, texts, (yield Embed(index.embedder, texts)))


def state_at(events: list[Event], version: int) -> tuple[int, int] | None:
    """The ``(head, base)`` right after ``version``, from the event log; None if no
    kept event records it. Version 0 is the empty history before the first write."""
    if version == 0:
        return 0, 0
    for event in reversed(events):  # a snapshot's event repeats its version: same state
        if event.version == version:
            return event.head_after, event.base_after
    return None


def version_missing(
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
    if state is not None and state_at(events, version) == state:
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


__all__ = [
    "MAX_TTL",
    "Embed",
    "Op",
    "Operations",
    "Options",
    "Request",
    "refuse_pickling",
    "split_options",
    "state_at",
    "version_missing",
]
