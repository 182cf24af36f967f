"""The asynchronous facade: :func:`open_async`, :class:`AsyncStore`, :class:`AsyncSession`.

The same names and semantics as :mod:`memvault.store`, awaited. Validation,
encoding and decoding are shared with the sync facade (:class:`~memvault.store.Options`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, cast

from memvault.backends.base import AsyncBackend, AsyncSearching, AsyncVectorStore, Capabilities
from memvault.embedders import aembed
from memvault.messages import Message, MessageLike, Record
from memvault.model import (
    COMPACT_BATCH,
    CompactStats,
    Event,
    Progress,
    SessionInfo,
    Snapshot,
    check_batch,
    check_count,
)
from memvault.paging import SessionPage, check_page, page_of
from memvault.sansio import drive_async
from memvault.search import Hit, check_query, check_sessions, hits, no_index, rank
from memvault.store import Options, refuse_pickling, split_options
from memvault.urls import open_async_backend, redact
from memvault.vectors import Index, depth, reclaim, request


class AsyncSession:
    """The async twin of :class:`memvault.Session`; see it for each method's contract."""

    __reduce__ = refuse_pickling

    def __init__(self, store: AsyncStore, session_id: str) -> None:
        self._opts = store.options
        self.id = self._opts.limits.check_session_id(session_id)
        self._backend = store.backend
        self._store = store

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def append(
        self,
        messages: Sequence[MessageLike],
        *,
        expect_version: int | None = None,
        expect_message: str | None = None,
    ) -> int:
        records = await self._store.embedded(
            self.id, self._opts.encode(messages, expect_version, expect_message)
        )
        return await self._backend.append(
            self.id, records, expect_version, expect_message, self._opts.write()
        )

    async def history(
        self, last: int | None = None, *, full: bool = False, at_version: int | None = None
    ) -> list[Message]:
        last = self._opts.check_last(last)
        if at_version is None:
            stored = await self._backend.history(
                self.id, *self._opts.read_args(last, full, self._opts.now())
            )
            return self._opts.decode(self.id, stored)
        check_count("at_version", at_version)
        events = await self.log()
        state = self._opts.state_at(events, at_version)
        at = (
            None
            if state is None
            else await self._backend.chain(self.id, *state, last, self._opts.now())
        )
        if at is None:
            raise self._opts.version_missing(
                self.id, at_version, state, await self.log(), await self.info()
            )
        return self._opts.decode(self.id, at)

    async def summarize(
        self, summary: MessageLike, *, through: str, expect_version: int | None = None
    ) -> int:
        record, through = self._opts.check_summary(summary, through, expect_version)
        (record,) = await self._store.embedded(self.id, [record])
        return await self._backend.summarize(
            self.id, record, through, expect_version, self._opts.write()
        )

    async def info(self) -> SessionInfo | None:
        return await self._backend.info(self.id, self._opts.now())

    async def pop(self) -> Message | None:
        stored = await self._backend.pop(self.id, self._opts.write())
        return self._opts.decode(self.id, [stored])[0] if stored else None

    async def trim(self, keep_last: int) -> int:
        return await self._backend.trim(
            self.id, check_count("keep_last", keep_last), "trim", self._opts.write()
        )

    async def clear(self) -> int:
        return await self._backend.trim(self.id, 0, "clear", self._opts.write())

    async def snapshot(self, name: str) -> Snapshot:
        return await self._backend.snapshot(
            self.id, self._opts.check_snapshot_name(name), self._opts.write()
        )

    async def snapshots(self) -> list[Snapshot]:
        return await self._backend.snapshots(self.id, self._opts.now())

    async def rollback(self, name: str) -> Snapshot:
        name = self._opts.check_snapshot_name(name, user=False)
        return await self._backend.rollback(self.id, name, self._opts.write())

    async def fork(self, new_id: str, *, at: str | None = None) -> AsyncSession:
        new = AsyncSession(self._store, new_id)
        at = None if at is None else self._opts.check_snapshot_name(at, user=False)
        await self._backend.fork(self.id, new.id, at, self._opts.write())
        return new

    async def log(self) -> list[Event]:
        return await self._backend.log(self.id, self._opts.now())

    async def search(self, query: str, k: int = 10, *, include_hidden: bool = False) -> list[Hit]:
        return await self._store.search(query, k, [self.id], include_hidden=include_hidden)

    async def delete(self) -> bool:
        return await self._backend.delete(self.id, self._opts.now())


# The async twin of store.Store: alike in shape only (each method awaits the backend).
class AsyncStore:
    """The async twin of :class:`memvault.Store`; use with ``async with``."""

    __reduce__ = refuse_pickling

    def __init__(self, backend: AsyncBackend, options: Options) -> None:
        self.backend = backend
        self.options = options

    @functools.cached_property
    def capabilities(self) -> Capabilities:
        """What the backend has beyond the protocol, worked out once."""
        return Capabilities.of(self.backend)

    def searching(self) -> AsyncSearching | None:
        """The backend's lexical index, if it has one."""
        return cast(AsyncSearching, self.backend) if self.capabilities.search else None

    def vector_store(self) -> AsyncVectorStore:
        """The backend as a vector store; ConfigurationError if it is not one."""
        self.capabilities.require_vectors()
        return cast(AsyncVectorStore, self.backend)

    def __repr__(self) -> str:
        return f"AsyncStore({redact(self.options.url)!r})"

    async def vectors(self) -> Index | None:
        """The semantic index, checked on first use (see :meth:`memvault.Store.vectors`)."""
        index = self.options.index
        if index is not None and not index.checked:
            index.check_space(await self.vector_store().vector_space())
        return index

    async def embedded(self, session_id: str, records: list[Record]) -> list[Record]:
        index = await self.vectors()
        if index is None:
            return records
        if index.unclaimed:
            await self.vector_store().set_vector_space(index.space, False)
            index.unclaimed = False
        texts = index.texts_of(session_id, records)
        return index.attach(records, texts, await aembed(index.embedder, texts))

    async def recall(
        self,
        query: str,
        terms: list[str],
        ids: list[str] | None,
        k: int,
        include_hidden: bool = False,
    ) -> list[Hit]:
        vectors = await self.vectors()
        lexical = self.searching()
        if vectors is None and lexical is not None:
            now = self.options.now()
            return hits(await lexical.search(ids, terms, k, bool(include_hidden), now))
        if include_hidden:
            raise no_index(self.capabilities.backend, vectors is not None)
        ids = await self.sessions() if ids is None else ids
        if vectors is None:
            return rank(
                terms, [(sid, await self.session(sid).history(full=True)) for sid in ids], k
            )
        read = self.options.read_args(None, True, self.options.now())
        views = [(sid, await self.backend.history(sid, *read)) for sid in ids]
        found = (
            hits(await lexical.search(ids, terms, depth(k), False, self.options.now()))
            if lexical is not None
            else rank(terms, [(sid, self.options.decode(sid, v)) for sid, v in views], depth(k))
        )
        docs = vectors.docs(views)
        vectors.remember(await self.vector_store().get_vectors(vectors.unknown(docs)))
        texts = vectors.to_embed(query, docs)
        return vectors.rank(texts, await aembed(vectors.embedder, texts), docs, found, k)

    def session(self, session_id: str) -> AsyncSession:
        return AsyncSession(self, session_id)

    async def sessions(self) -> list[str]:
        return await self.backend.sessions(self.options.now())

    async def sessions_page(
        self,
        limit: int = 100,
        *,
        cursor: str | None = None,
        order: str = "id",
        descending: bool = False,
        match: str | None = None,
    ) -> SessionPage:
        query = check_page(limit, cursor, order, descending, match)
        return page_of(query, await self.backend.sessions_page(query, self.options.now()))

    async def search(
        self,
        query: str,
        k: int = 10,
        sessions: Sequence[str] | None = None,
        *,
        include_hidden: bool = False,
    ) -> list[Hit]:
        terms, k = check_query(query, k)
        ids = None if sessions is None else check_sessions(sessions)
        return await self.recall(query, terms, ids, k, include_hidden)

    async def compact(
        self,
        keep_events: int | None = None,
        *,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        if keep_events is not None:
            check_count("keep_events", keep_events)
        check_batch(batch)
        now = self.options.now()
        stats = await self.backend.compact(keep_events, now, batch, progress)
        if not self.capabilities.vectors:
            return stats
        return replace(stats, vectors=await drive_async(reclaim(now), request(self.backend)))

    async def close(self) -> None:
        await self.backend.close()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def open_async(url: str | None = None, **options: Any) -> AsyncStore:
    """Open a store for asyncio; the same URLs and options as :func:`memvault.open`."""
    return open_async_store(url, options)


def open_async_store(url: str | None, options: dict[str, Any], module: Any = None) -> AsyncStore:
    """:func:`open_async`, with ``module`` in place of the backend the URL names (see
    :func:`memvault.store.open_store`)."""
    opts, backend_options = split_options(url, options)
    return AsyncStore(open_async_backend(opts.url, backend_options, module), opts)
