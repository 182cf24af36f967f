"""The protocol every backend implements, sync and async.

A backend receives validated, encoded input (session ids, snapshot names and
records are checked by the facade before any I/O) and makes each operation one
atomic step in its engine. Stored messages come back as ``(depth, body)`` pairs,
oldest first; the facade decodes them.

``history(..., full=False)`` is the context view (the newest summary, then the
messages after its range); ``full=True`` every message above base with each
summary right after the message it was taken through. The facade passes ``full``
only when it is True, so a backend without summaries keeps working until one is
asked of it.

``search`` is optional (:class:`Searching`): a backend with a lexical index answers
it; the facade searches one without it by scanning the full view
(:mod:`memvault.search`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from memvault.messages import Record
from memvault.model import COMPACT_BATCH, CompactStats, Event, Progress, SessionInfo, Snapshot
from memvault.paging import Listed, PageQuery

T = TypeVar("T")

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
    every write makes one)."""

    writer: str
    now: float
    ttl: float | None

    @property
    def expires_at(self) -> float | None:
        return None if self.ttl is None else self.now + self.ttl


class Backend(Protocol):
    """The synchronous backend protocol: one method per store operation (README's
    API tour), each one atomic.

    ``sessions_page`` lists the live sessions a page at a time
    (:mod:`memvault.paging`): at most ``query.limit`` of them after
    ``query.after``, each with its key in ``query.order``.

    ``chain`` reads any state the event log points to: the messages of the chain
    ending at node ``head`` with depth above ``base`` (the newest ``last`` of them;
    None: all), oldest first, like ``history``. Node 0 and a session that is not
    live give ``[]``; a ``head`` that is not stored (compacted away) gives None.
    """

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int: ...
    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]: ...
    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None: ...
    def info(self, session_id: str, now: float) -> SessionInfo | None: ...
    def pop(self, session_id: str, w: Write) -> Stored | None: ...
    def summarize(
        self,
        session_id: str,
        record: Record,
        through: str,
        expect_version: int | None,
        w: Write,
    ) -> int: ...
    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int: ...
    def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot: ...
    def snapshots(self, session_id: str, now: float) -> list[Snapshot]: ...
    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot: ...
    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None: ...
    def log(self, session_id: str, now: float) -> list[Event]: ...
    def delete(self, session_id: str, now: float) -> bool: ...
    def sessions(self, now: float) -> list[str]: ...
    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]: ...
    def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats: ...
    def close(self) -> None: ...


class Searching(Protocol):
    """The optional search primitive of a backend with a lexical index (async
    backends await it).

    ``search(session_ids, terms, k, include_hidden, now)``: the ``k`` best matches of
    any of ``terms`` (words, as :func:`memvault.search.words` makes them) among the
    messages and summaries of the live sessions ``session_ids`` (None: every live
    session), best first; hidden ones (position None) only if ``include_hidden``.
    """

    def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]: ...


class AsyncBackend(Protocol):
    """The asynchronous backend protocol: :class:`Backend` with every method awaited."""

    async def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int: ...
    async def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]: ...
    async def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None: ...
    async def info(self, session_id: str, now: float) -> SessionInfo | None: ...
    async def pop(self, session_id: str, w: Write) -> Stored | None: ...
    async def summarize(
        self,
        session_id: str,
        record: Record,
        through: str,
        expect_version: int | None,
        w: Write,
    ) -> int: ...
    async def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int: ...
    async def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot: ...
    async def snapshots(self, session_id: str, now: float) -> list[Snapshot]: ...
    async def rollback(self, session_id: str, name: str, w: Write) -> Snapshot: ...
    async def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None: ...
    async def log(self, session_id: str, now: float) -> list[Event]: ...
    async def delete(self, session_id: str, now: float) -> bool: ...
    async def sessions(self, now: float) -> list[str]: ...
    async def sessions_page(self, query: PageQuery, now: float) -> list[Listed]: ...
    async def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats: ...
    async def close(self) -> None: ...


class _Running:
    """Counts the calls running on worker threads; runs a function once none is."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    def run(self, function: Callable[..., T], *args: Any) -> T:
        with self._idle:
            self._count += 1
        try:
            return function(*args)
        finally:
            with self._idle:
                self._count -= 1
                self._idle.notify_all()

    def wait_then(self, function: Callable[[], T]) -> T:
        with self._idle:
            self._idle.wait_for(lambda: self._count == 0)
        return function()


class ThreadedAsyncBackend:
    """The async face of a sync backend: every call runs on a worker thread.

    Used for backends whose driver has no native async client (memory, SQLite).
    A call whose awaiter is cancelled runs on to its end on its thread (a thread
    cannot be interrupted); :meth:`close` waits for such calls before it closes the
    backend.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._calls = _Running()

    def __getattr__(self, name: str) -> Any:
        # search exists only where the wrapped backend has an index (Searching)
        if name == "search" and hasattr(self.backend, "search"):
            return self._search
        raise AttributeError(name)

    async def _search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        searching = cast(Searching, self.backend)
        return await self._thread(searching.search, session_ids, terms, k, include_hidden, now)

    async def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        return await self._thread(
            self.backend.append, session_id, records, expect_version, expect_message, w
        )

    async def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        args = (session_id, last, now, True) if full else (session_id, last, now)
        return await self._thread(self.backend.history, *args)

    async def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        return await self._thread(self.backend.chain, session_id, head, base, last, now)

    async def info(self, session_id: str, now: float) -> SessionInfo | None:
        return await self._thread(self.backend.info, session_id, now)

    async def pop(self, session_id: str, w: Write) -> Stored | None:
        return await self._thread(self.backend.pop, session_id, w)

    async def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> int:
        return await self._thread(
            self.backend.summarize, session_id, record, through, expect_version, w
        )

    async def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        return await self._thread(self.backend.trim, session_id, keep_last, op, w)

    async def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        return await self._thread(self.backend.snapshot, session_id, name, w)

    async def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        return await self._thread(self.backend.snapshots, session_id, now)

    async def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        return await self._thread(self.backend.rollback, session_id, name, w)

    async def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        await self._thread(self.backend.fork, session_id, new_id, at, w)

    async def log(self, session_id: str, now: float) -> list[Event]:
        return await self._thread(self.backend.log, session_id, now)

    async def delete(self, session_id: str, now: float) -> bool:
        return await self._thread(self.backend.delete, session_id, now)

    async def sessions(self, now: float) -> list[str]:
        return await self._thread(self.backend.sessions, now)

    async def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        return await self._thread(self.backend.sessions_page, query, now)

    async def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        return await self._thread(self.backend.compact, keep_events, now, batch, progress)

    async def close(self) -> None:
        # A call whose awaiter was cancelled runs on to its end on its thread: close
        # only after it (SQLite's connections closed under a running call crash).
        await asyncio.to_thread(self._calls.wait_then, self.backend.close)

    async def _thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on a worker thread, counted while it runs."""
        return await asyncio.to_thread(self._calls.run, function, *args)

    # The search vectors, when the backend stores them (memvault.vectors.VectorStore).
    async def vector_space(self) -> str | None:
        return await self._thread(self.backend.vector_space)  # type: ignore[attr-defined]

    async def set_vector_space(self, space: str, reset: bool) -> None:
        await self._thread(
            self.backend.set_vector_space,  # type: ignore[attr-defined]
            space,
            reset,
        )

    async def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        return await self._thread(self.backend.get_vectors, keys)  # type: ignore[attr-defined]

    async def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        await self._thread(self.backend.put_vectors, items)  # type: ignore[attr-defined]

    async def vector_keys(self) -> list[str]:
        return await self._thread(self.backend.vector_keys)  # type: ignore[attr-defined]

    async def drop_vectors(self, keys: Sequence[str]) -> None:
        await self._thread(self.backend.drop_vectors, keys)  # type: ignore[attr-defined]

    async def node_bodies(self, session_id: str, now: float) -> list[str]:
        return await self._thread(
            self.backend.node_bodies,  # type: ignore[attr-defined]
            session_id,
            now,
        )
