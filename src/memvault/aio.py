"""The asynchronous facade: :func:`open_async`, :class:`AsyncStore`, :class:`AsyncSession`.

The same names and semantics as :mod:`memvault.store`, awaited: every method drives
the same operation of :mod:`memvault.operations` as its sync twin, awaiting each
request.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar

from memvault.backends.base import AsyncBackend, Capabilities
from memvault.embedders import aembed
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
from memvault.sansio import drive_async
from memvault.search import Hit
from memvault.store import now
from memvault.urls import open_async_backend, redact

T = TypeVar("T")


class AsyncSession:
    """The async twin of :class:`memvault.Session`; see it for each method's contract."""

    __reduce__ = refuse_pickling

    def __init__(self, store: AsyncStore, session_id: str) -> None:
        self.id = store.ops.session_id(session_id)
        self._store, self._ops, self._run = store, store.ops, store.run

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def append(
        self,
        messages: Sequence[MessageLike],
        *,
        expect_version: int | None = None,
        expect_message: str | None = None,
    ) -> int:
        return await self._run(self._ops.append(self.id, messages, expect_version, expect_message))

    async def history(
        self, last: int | None = None, *, full: bool = False, at_version: int | None = None
    ) -> list[Message]:
        return await self._run(self._ops.history(self.id, last, full, at_version))

    async def summarize(
        self, summary: MessageLike, *, through: str, expect_version: int | None = None
    ) -> int:
        return await self._run(self._ops.summarize(self.id, summary, through, expect_version))

    async def info(self) -> SessionInfo | None:
        return await self._run(self._ops.info(self.id))

    async def pop(self) -> Message | None:
        return await self._run(self._ops.pop(self.id))

    async def trim(self, keep_last: int) -> int:
        return await self._run(self._ops.trim(self.id, keep_last))

    async def clear(self) -> int:
        return await self._run(self._ops.trim(self.id, 0, "clear"))

    async def snapshot(self, name: str) -> Snapshot:
        return await self._run(self._ops.snapshot(self.id, name))

    async def snapshots(self) -> list[Snapshot]:
        return await self._run(self._ops.snapshots(self.id))

    async def rollback(self, name: str) -> Snapshot:
        return await self._run(self._ops.rollback(self.id, name))

    async def fork(self, new_id: str, *, at: str | None = None) -> AsyncSession:
        return AsyncSession(self._store, await self._run(self._ops.fork(self.id, new_id, at)))

    async def log(self) -> list[Event]:
        return await self._run(self._ops.log(self.id))

    async def search(self, query: str, k: int = 10, *, include_hidden: bool = False) -> list[Hit]:
        return await self._run(self._ops.search(query, k, [self.id], include_hidden))

    async def delete(self) -> bool:
        return await self._run(self._ops.delete(self.id))


# The async twin of store.Store: alike in shape only (each method awaits its operation).
class AsyncStore:
    """The async twin of :class:`memvault.Store`; use with ``async with``."""

    __reduce__ = refuse_pickling

    def __init__(self, backend: AsyncBackend, options: Options) -> None:
        self.backend = backend
        self.options = options
        self.capabilities = Capabilities.of(backend)
        self.ops = Operations(options, self.capabilities, now)

    def __repr__(self) -> str:
        return f"AsyncStore({redact(self.options.url)!r})"

    async def run(self, operation: Op[T]) -> T:
        """Run one of :attr:`ops`' operations, each request awaited."""
        return await drive_async(operation, self._perform)

    async def _perform(self, request: Request) -> Any:
        if isinstance(request, Embed):
            return await aembed(request.embedder, request.texts)
        return await getattr(self.backend, request[0])(*request[1:])

    def session(self, session_id: str) -> AsyncSession:
        return AsyncSession(self, session_id)

    async def sessions(self) -> list[str]:
        return await self.run(self.ops.sessions())

    async def sessions_page(
        self,
        limit: int = 100,
        *,
        cursor: str | None = None,
        order: str = "id",
        descending: bool = False,
        match: str | None = None,
    ) -> SessionPage:
        return await self.run(self.ops.sessions_page(limit, cursor, order, descending, match))

    async def search(
        self,
        query: str,
        k: int = 10,
        sessions: Sequence[str] | None = None,
        *,
        include_hidden: bool = False,
    ) -> list[Hit]:
        return await self.run(self.ops.search(query, k, sessions, include_hidden))

    async def compact(
        self,
        keep_events: int | None = None,
        *,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        return await self.run(self.ops.compact(keep_events, batch, progress))

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
