"""The backends whose operations are written without I/O (Redis, PostgreSQL): every
method of the protocol hands its operation to the I/O layer.

Such a backend's logic is one object, ``_ops`` (:class:`BackendOps`): for each method
of :class:`~memvault.backends.base.Backend` and
:class:`~memvault.backends.base.VectorStore`, a method taking the same arguments that
returns the operation, a generator that yields requests and returns the result
(:mod:`memvault.sansio`): Redis's scripts and commands
(:mod:`memvault.backends.redis.ops`), PostgreSQL's statements
(:mod:`memvault.backends.postgres.calls`). :class:`Driven` and :class:`AsyncDriven`
implement those methods by running the operation with ``_run``, which the backend
provides (its checks, then :func:`memvault.sansio.drive` or ``drive_async`` with the
function that sends one request): the sync and async faces of a backend share every
operation and differ only in how a request is sent. ``close`` is the backend's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from memvault.backends.base import Stored, Write
from memvault.messages import Record
from memvault.model import COMPACT_BATCH, CompactStats, Event, Progress, SessionInfo, Snapshot
from memvault.paging import Listed, PageQuery
from memvault.sansio import Operation

T = TypeVar("T")
Op = Operation[Any, T]


class BackendOps(Protocol):
    """A driven backend's logic: each method is the protocol method of that name
    (see :class:`~memvault.backends.base.Backend`), returning its operation."""

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> Op[int]: ...
    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> Op[list[Stored]]: ...
    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> Op[list[Stored] | None]: ...
    def info(self, session_id: str, now: float) -> Op[SessionInfo | None]: ...
    def pop(self, session_id: str, w: Write) -> Op[Stored | None]: ...
    def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> Op[int]: ...
    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> Op[int]: ...
    def snapshot(self, session_id: str, name: str, w: Write) -> Op[Snapshot]: ...
    def snapshots(self, session_id: str, now: float) -> Op[list[Snapshot]]: ...
    def rollback(self, session_id: str, name: str, w: Write) -> Op[Snapshot]: ...
    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> Op[None]: ...
    def log(self, session_id: str, now: float) -> Op[list[Event]]: ...
    def delete(self, session_id: str, now: float) -> Op[bool]: ...
    def sessions(self, now: float) -> Op[list[str]]: ...
    def sessions_page(self, query: PageQuery, now: float) -> Op[list[Listed]]: ...
    def compact(
        self, keep_events: int | None, now: float, batch: int, progress: Progress | None
    ) -> Op[CompactStats]: ...
    def vector_space(self) -> Op[str | None]: ...
    def set_vector_space(self, space: str, reset: bool) -> Op[None]: ...
    def get_vectors(self, keys: Sequence[str]) -> Op[dict[str, bytes]]: ...
    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> Op[None]: ...
    def vector_keys(self) -> Op[list[str]]: ...
    def drop_vectors(self, keys: Sequence[str]) -> Op[None]: ...
    def node_bodies(self, session_id: str, now: float) -> Op[list[str]]: ...


class Driven:
    """The sync protocol and vector store over ``_ops``, each method one operation run
    by ``_run`` (the backend's)."""

    _ops: BackendOps

    def _run(self, operation: Op[T]) -> T:
        """Run ``operation``, sending each of its requests."""
        raise NotImplementedError

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        return self._run(self._ops.append(session_id, records, expect_version, expect_message, w))

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        return self._run(self._ops.history(session_id, last, now, full))

    def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        return self._run(self._ops.chain(session_id, head, base, last, now))

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        return self._run(self._ops.info(session_id, now))

    def pop(self, session_id: str, w: Write) -> Stored | None:
        return self._run(self._ops.pop(session_id, w))

    def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> int:
        return self._run(self._ops.summarize(session_id, record, through, expect_version, w))

    def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        return self._run(self._ops.trim(session_id, keep_last, op, w))

    def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        return self._run(self._ops.snapshot(session_id, name, w))

    def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        return self._run(self._ops.snapshots(session_id, now))

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        return self._run(self._ops.rollback(session_id, name, w))

    def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        return self._run(self._ops.fork(session_id, new_id, at, w))

    def log(self, session_id: str, now: float) -> list[Event]:
        return self._run(self._ops.log(session_id, now))

    def delete(self, session_id: str, now: float) -> bool:
        return self._run(self._ops.delete(session_id, now))

    def sessions(self, now: float) -> list[str]:
        return self._run(self._ops.sessions(now))

    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        return self._run(self._ops.sessions_page(query, now))

    def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        return self._run(self._ops.compact(keep_events, now, batch, progress))

    def vector_space(self) -> str | None:
        return self._run(self._ops.vector_space())

    def set_vector_space(self, space: str, reset: bool) -> None:
        self._run(self._ops.set_vector_space(space, reset))

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        return self._run(self._ops.get_vectors(keys))

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._run(self._ops.put_vectors(items))

    def vector_keys(self) -> list[str]:
        return self._run(self._ops.vector_keys())

    def drop_vectors(self, keys: Sequence[str]) -> None:
        self._run(self._ops.drop_vectors(keys))

    def node_bodies(self, session_id: str, now: float) -> list[str]:
        return self._run(self._ops.node_bodies(session_id, now))


# The async twin of Driven: alike in shape only (each method awaits its operation).
class AsyncDriven:
    """The async protocol and vector store over ``_ops``: :class:`Driven`, awaited."""

    _ops: BackendOps

    async def _run(self, operation: Op[T]) -> T:
        """Run ``operation``, awaiting each of its requests."""
        raise NotImplementedError

    async def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        return await self._run(
            self._ops.append(session_id, records, expect_version, expect_message, w)
        )

    async def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        return await self._run(self._ops.history(session_id, last, now, full))

    async def chain(
        self, session_id: str, head: int, base: int, last: int | None, now: float
    ) -> list[Stored] | None:
        return await self._run(self._ops.chain(session_id, head, base, last, now))

    async def info(self, session_id: str, now: float) -> SessionInfo | None:
        return await self._run(self._ops.info(session_id, now))

    async def pop(self, session_id: str, w: Write) -> Stored | None:
        return await self._run(self._ops.pop(session_id, w))

    async def summarize(
        self, session_id: str, record: Record, through: str, expect_version: int | None, w: Write
    ) -> int:
        return await self._run(self._ops.summarize(session_id, record, through, expect_version, w))

    async def trim(self, session_id: str, keep_last: int, op: str, w: Write) -> int:
        return await self._run(self._ops.trim(session_id, keep_last, op, w))

    async def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        return await self._run(self._ops.snapshot(session_id, name, w))

    async def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        return await self._run(self._ops.snapshots(session_id, now))

    async def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        return await self._run(self._ops.rollback(session_id, name, w))

    async def fork(self, session_id: str, new_id: str, at: str | None, w: Write) -> None:
        return await self._run(self._ops.fork(session_id, new_id, at, w))

    async def log(self, session_id: str, now: float) -> list[Event]:
        return await self._run(self._ops.log(session_id, now))

    async def delete(self, session_id: str, now: float) -> bool:
        return await self._run(self._ops.delete(session_id, now))

    async def sessions(self, now: float) -> list[str]:
        return await self._run(self._ops.sessions(now))

    async def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        return await self._run(self._ops.sessions_page(query, now))

    async def compact(
        self,
        keep_events: int | None,
        now: float,
        batch: int = COMPACT_BATCH,
        progress: Progress | None = None,
    ) -> CompactStats:
        return await self._run(self._ops.compact(keep_events, now, batch, progress))

    async def vector_space(self) -> str | None:
        return await self._run(self._ops.vector_space())

    async def set_vector_space(self, space: str, reset: bool) -> None:
        await self._run(self._ops.set_vector_space(space, reset))

    async def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        return await self._run(self._ops.get_vectors(keys))

    async def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        await self._run(self._ops.put_vectors(items))

    async def vector_keys(self) -> list[str]:
        return await self._run(self._ops.vector_keys())

    async def drop_vectors(self, keys: Sequence[str]) -> None:
        await self._run(self._ops.drop_vectors(keys))

    async def node_bodies(self, session_id: str, now: float) -> list[str]:
        return await self._run(self._ops.node_bodies(session_id, now))


__all__ = ["AsyncDriven", "BackendOps", "Driven"]
