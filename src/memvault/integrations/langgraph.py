"""memvault as a LangGraph checkpointer: ``MemvaultSaver``.

>>> with MemvaultSaver.from_conn_string("sqlite:///graph.db") as saver:   # doctest: +SKIP
...     graph = builder.compile(checkpointer=saver)

``MemvaultSaver`` is a ``langgraph.checkpoint.base.BaseCheckpointSaver`` on any
memvault backend (``memory://``, ``sqlite:///``, ``redis://``, ``postgresql://``):
``put``, ``put_writes``, ``get_tuple``, ``list``, ``delete_thread``, ``copy_thread``,
``prune``, ``delete_for_runs`` and ``get_delta_channel_history``, each with its
``a*`` twin. The sync methods run on a :class:`memvault.Store` (``store=``), the
async ones on a :class:`memvault.AsyncStore` (``async_store=``); the async methods
never call the sync ones. ``from_conn_string(url)`` opens both kinds: ``with`` gives
a saver with a sync store, ``async with`` one with an async store.

Storage (details in :mod:`memvault.integrations._langgraph_log`): a thread is the
memvault session ``langgraph:<thread_id>`` (all its namespaces), so
``memvault sessions``, ``show`` and ``log`` list threads, their checkpoints and
writes, and which writer put each; the store's ``ttl=`` expires a whole thread.
Every saver write is one atomic, idempotent memvault append; values go through
the saver's ``serde`` (``JsonPlusSerializer`` by default; an
``EncryptedSerializer`` works) and memvault never pickles. A list channel that
grows (``messages``) is stored as its new items only, so a thread's storage grows
with its messages, not with messages x steps.

Deleting: ``delete_thread`` and ``prune(strategy="delete")`` remove the thread's
session physically. ``prune(strategy="keep_latest")`` and ``delete_for_runs`` append
a marker that hides the checkpoints (and their writes) from ``list``/``get_tuple``,
like memvault's own trim: the data stays stored (a checkpoint kept by ``prune``
still reads its shared values, and ``DeltaChannel`` histories still reach their
seeds) until ``delete_thread``. ``copy_thread`` is memvault's ``fork`` (the target
thread must not exist: ``ConflictError``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.aio import AsyncStore
from memvault.errors import ConfigurationError, ConflictError
from memvault.integrations._common import missing_extra
from memvault.integrations._opener import Opener, checked
from memvault.messages import Message
from memvault.sansio import drive, drive_async
from memvault.store import Store

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        get_checkpoint_id,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol

    from memvault.integrations._langgraph_log import (
        PREFIX,
        Stored,
        ThreadLog,
        checkpoint_message,
        entries,
        marker_message,
        session_id,
        writes_message,
    )
    from memvault.integrations._langgraph_values import MISSING, Lru
# The optional dependency's imports, as in every adapter (names differ).
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("langgraph", "langgraph", _exc) from _exc

__all__ = ["MemvaultSaver"]

CACHE_SIZE = 64  # checkpoints whose stored values a saver remembers to encode children
LOGS = 16  # threads whose log a saver keeps, to read only the nodes appended since
VALUES = 256  # (node, channel) values a saver keeps decoded, to decode only what is new


@dataclass(frozen=True)
class _Read:
    session: str
    last: int | None


# The plans' request types: one small dataclass each, alike in shape only.
@dataclass(frozen=True)
class _Info:
    session: str


@dataclass(frozen=True)
class _Append:
    session: str
    message: Message
    after: str | None = None  # a node the session must store (ConflictError is the reply)


@dataclass(frozen=True)
class _Delete:
    session: str


@dataclass(frozen=True)
class _Fork:
    source: str
    target: str


@dataclass(frozen=True)
class _Threads:
    pass


_Step = _Read | _Info | _Append | _Delete | _Fork | _Threads
_Plan = Generator[_Step, Any, Any]


def _call(store: Any, step: _Step) -> Any:
    """Do ``step`` on a Store (the result) or an AsyncStore (an awaitable of it)."""
    if isinstance(step, _Read):
        return store.session(step.session).history(step.last)
    if isinstance(step, _Info):
        return store.session(step.session).info()
    if isinstance(step, _Append):
        return store.session(step.session).append([step.message], expect_message=step.after)
    if isinstance(step, _Delete):
        return store.session(step.session).delete()
    if isinstance(step, _Fork):
        return store.session(step.source).fork(step.target)
    return store.sessions()


def _run(store: Store, plan: _Plan) -> Any:
    """Run a plan on a sync store (an append's ConflictError is the plan's to handle)."""

    def perform(step: _Step) -> Any:
        try:
            return _call(store, step)
        except ConflictError as exc:
            if isinstance(step, _Append):
                return exc
            raise

    return drive(plan, perform)


async def _arun(store: AsyncStore, plan: _Plan) -> Any:
    """Run a plan on an async store; it never touches a sync one."""

    async def perform(step: _Step) -> Any:
        try:
            return await _call(store, step)
        except ConflictError as exc:
            if isinstance(step, _Append):
                return exc
            raise

    return await drive_async(plan, perform)


def _where(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


class MemvaultSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer that stores threads as memvault sessions.

    Args:
        store: the sync store the sync methods use (left open: it is yours).
        async_store: the async store the async methods use (left open).
        serde: LangGraph's serializer protocol (default ``JsonPlusSerializer``).

    Raises:
        ConfigurationError: neither store given, or a store of the wrong kind.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        async_store: AsyncStore | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        store, async_store = checked(store, async_store)
        self.store = store
        self.async_store = async_store
        # (session, ns, checkpoint id) -> (its node, {channel: Stored})
        self._cache = Lru(CACHE_SIZE)
        self._logs = Lru(LOGS)  # session -> ThreadLog
        self._values = Lru(VALUES)  # (session, node, channel) -> canonical value

    @classmethod
    def from_conn_string(
        cls, url: str, *, serde: SerializerProtocol | None = None, **options: Any
    ) -> Opener[MemvaultSaver]:
        """A saver on memvault URL ``url``, as a sync or async context manager.

        ``with MemvaultSaver.from_conn_string(url) as saver`` opens a sync store,
        ``async with`` an async one; leaving the block closes it. ``options`` are
        memvault's (``ttl=``, ``writer=``, ...). See :mod:`memvault.integrations._opener`.
        """
        return Opener(
            lambda store, async_store: cls(store, async_store=async_store, serde=serde),
            url,
            options,
        )

    # -- the sans-I/O plans: every method below is one of these, run sync or async

    def _forget(self, session: str) -> None:
        self._logs.drop(lambda key: key == session)
        for cache in (self._cache, self._values):
            cache.drop(lambda key: key[0] == session)

    def _read(self, thread_id: str) -> _Plan:
        """Read a thread's log: only the nodes appended since, if the saver has the rest."""
        session = session_id(thread_id)
        known = self._logs.get(session)
        known = None if known is MISSING else known
        info = yield _Info(session)
        if info is None:
            return ThreadLog(thread_id, [], self.serde, self._values)
        stamp = (info.created_at, info.version)  # a thread deleted and made again differs
        log = None
        if known is not None and known.stamp == stamp:
            log = known  # nothing changed
        elif (
            known is not None
            and known.length
            and known.stamp[0] == info.created_at
            and info.length >= known.length
        ):
            newest = entries((yield _Read(session, info.length - known.length + 1)))
            if newest and newest[0][0] == known.last:
                log = known.extended(newest[1:], stamp)
        if log is None:
            log = ThreadLog(
                thread_id, entries((yield _Read(session, None))), self.serde, self._values, stamp
            )
        if log is not known:  # get made a known one the most recently used
            self._logs.put(session, log)
        return log

    def _appended(self, session: str, message: Message, version: int) -> None:
        """Add the node this saver just appended to its log of the thread, if that log
        was the session's state right before: the next read then need not fetch it.

        The append returned ``version``: one more than the log's means exactly one
        operation happened since the log was read, and a node the log did not hold
        is now stored, so that operation appended it (a retry of the same content
        by another writer appends the same node). A thread deleted and made again
        meanwhile is still caught by the next read (its creation time differs).
        """
        log = self._logs.get(session)
        if log is MISSING or log.stamp is None or message.id in log.depth:
            return
        created, known = log.stamp
        if version == known + 1:
            self._logs.put(session, log.extended(entries([message]), (created, version)))

    def _get_plan(self, config: RunnableConfig) -> _Plan:
        thread_id, ns = _where(config)
        log = yield from self._read(thread_id)
        node = log.find(ns, get_checkpoint_id(config))
        if node is None:
            return None
        # A child is put next, most likely: its encoding compares with these values,
        # the decoded ones whose copies tuple() hands out, even if the put cache holds
        # copies of what was put: the child's items share their fields with them, and
        # they are in the CPU's caches (on a long thread, the put's copies compare slower).
        self._cache.put((log.session, ns, str(log.nodes[node]["id"])), (node, log.stored(node)))
        return log.tuple(node)

    def _list_plan(
        self,
        config: RunnableConfig | None,
        wanted: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Plan:
        if config is not None:
            threads = [str(config["configurable"]["thread_id"])]
        else:
            threads = sorted(s[len(PREFIX) :] for s in (yield _Threads()) if s.startswith(PREFIX))
        configurable = config["configurable"] if config else {}
        ns = configurable.get("checkpoint_ns")
        only = configurable.get("checkpoint_id")
        cursor = get_checkpoint_id(before) if before else None
        found: list[CheckpointTuple] = []
        for thread_id in threads:
            log = yield from self._read(thread_id)
            for node in log.listed(None if ns is None else str(ns)):
                cid = str(log.nodes[node]["id"])
                if (only is not None and cid != only) or (cursor is not None and cid >= cursor):
                    continue
                if wanted and any(log.metadata(node).get(k) != v for k, v in wanted.items()):
                    continue
                found.append(log.tuple(node))
                if limit is not None and len(found) >= limit:
                    return found
        return found

    def _put_plan(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> _Plan:
        thread_id, ns = _where(config)
        session = session_id(thread_id)
        parent_id = get_checkpoint_id(config)
        parent: tuple[str | None, Mapping[str, Stored]] = (None, {})
        if parent_id is not None:
            cached = self._cache.get((session, ns, parent_id))
            if cached is MISSING:
                log = yield from self._read(thread_id)
                node = log.first.get((ns, parent_id))
                cached = (node, log.stored(node)) if node is not None else None
            parent = cached or parent
        meta = get_serializable_checkpoint_metadata(config, metadata)
        message, stored = checkpoint_message(ns, checkpoint, meta, parent_id, parent[1], self.serde)
        # The node may share the parent node's values: it is appended only if that node
        # is still stored, in the same atomic step (the thread may have been deleted and
        # made again since the parent was read or put). If not, it is stored whole.
        version = yield _Append(session, message, parent[0])
        if isinstance(version, ConflictError):
            self._forget(session)
            message, stored = checkpoint_message(ns, checkpoint, meta, parent_id, {}, self.serde)
            version = yield _Append(session, message)
        self._appended(session, message, version)
        # A child compares with the copies in stored; the node's values are decoded
        # only if it is read.
        self._cache.put((session, ns, checkpoint["id"]), (message.id, stored))
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> _Plan:
        thread_id, ns = _where(config)
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        if writes:
            message = writes_message(ns, checkpoint_id, task_id, task_path, writes, self.serde)
            self._appended(
                session_id(thread_id), message, (yield _Append(session_id(thread_id), message))
            )

    def _delete_plan(self, thread_ids: Sequence[str]) -> _Plan:
        for thread_id in thread_ids:
            self._forget(session_id(thread_id))
            yield _Delete(session_id(thread_id))

    def _copy_plan(self, source: str, target: str) -> _Plan:
        if (yield _Info(session_id(source))) is not None:
            yield _Fork(session_id(source), session_id(target))

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str) -> _Plan:
        if strategy == "delete":
            yield from self._delete_plan(thread_ids)
            return
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        for thread_id in thread_ids:
            log = yield from self._read(thread_id)
            listed = log.listed(None)
            namespaces = {str(log.nodes[n]["ns"]) for n in listed}
            keep = [node for ns in namespaces if (node := log.find(ns, None))]
            if len(keep) < len(listed):
                yield _Append(
                    session_id(thread_id),
                    marker_message(
                        "prune", keep, "prune: keep the latest checkpoint of each namespace"
                    ),
                )

    def _forget_runs_plan(self, run_ids: Sequence[str]) -> _Plan:
        runs = set(run_ids)
        if not runs:
            return
        for session in (yield _Threads()):
            if not session.startswith(PREFIX):
                continue
            log = yield from self._read(session[len(PREFIX) :])
            if any(log.nodes[n].get("run") in runs for n in log.listed(None)):
                yield _Append(
                    session,
                    marker_message("forget_runs", sorted(runs), "delete_for_runs: hide these runs"),
                )

    def _delta_plan(self, config: RunnableConfig, channels: Sequence[str]) -> _Plan:
        if not channels:
            return {}
        thread_id, ns = _where(config)
        log = yield from self._read(thread_id)
        return log.delta_history(ns, get_checkpoint_id(config), channels)

    # -- the faces

    def _sync(self, plan: _Plan) -> Any:
        if self.store is None:
            raise ConfigurationError(
                "this MemvaultSaver has no sync store: give store= (or use the async methods)"
            )
        return _run(self.store, plan)

    async def _async(self, plan: _Plan) -> Any:
        if self.async_store is None:
            raise ConfigurationError(
                "this MemvaultSaver has no async store: give async_store= (or use the sync methods)"
            )
        return await _arun(self.async_store, plan)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self._get_plan(config))  # type: ignore[no-any-return]

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._async(self._get_plan(config))  # type: ignore[no-any-return]

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._sync(self._list_plan(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._async(self._list_plan(config, filter, before, limit)):
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self._put_plan(config, checkpoint, metadata))  # type: ignore[no-any-return]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._async(self._put_plan(config, checkpoint, metadata))  # type: ignore[no-any-return]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self._writes_plan(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._async(self._writes_plan(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self._delete_plan([thread_id]))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._async(self._delete_plan([thread_id]))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync(self._copy_plan(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._async(self._copy_plan(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._sync(self._prune_plan(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._async(self._prune_plan(thread_ids, strategy))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync(self._forget_runs_plan(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._async(self._forget_runs_plan(run_ids))

    def get_delta_channel_history(
        self,
        *,
        config: RunnableConfig,
        channels: Sequence[str],
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._sync(self._delta_plan(config, channels))  # type: ignore[no-any-return]

    async def aget_delta_channel_history(
        self,
        *,
        config: RunnableConfig,
        channels: Sequence[str],
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._async(self._delta_plan(config, channels))  # type: ignore[no-any-return]
