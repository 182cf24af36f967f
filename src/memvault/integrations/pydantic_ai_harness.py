"""memvault as pydantic-ai-harness's stores: ``MemvaultMemoryStore``, ``MemvaultStepStore``.

>>> store = memvault.open_async("sqlite:///agent.db")                   # doctest: +SKIP
>>> agent = Agent(model, capabilities=[                                   # doctest: +SKIP
...     Memory(store=MemvaultMemoryStore(store)),
...     StepPersistence(store=MemvaultStepStore(store)),
... ])

``MemvaultMemoryStore`` implements the harness's ``MemoryStore`` and
``SearchableMemoryStore`` protocols (``read``, ``get_operation``, ``write``,
``delete``, ``list_paths``, ``search``) on a :class:`memvault.AsyncStore`, on every
backend: versioned memory files, compare-and-set writes, and operation receipts
that make a replayed write (a retried tool call) apply once. ``MemvaultStepStore``
implements ``StepStore`` (step persistence: runs, step events, continuable
snapshots, the tool-effect ledger; see its docstring), and with its
``list_snapshots`` the ``SnapshotStore`` that ``conversation_search`` reads.

How a memory file is stored. A memory file is the memvault session
``<namespace>:file:<path>``; each write appends one message holding the file's new
content (its text, so ``memvault show`` and ``search`` read it), each delete a
tombstone. Nothing is overwritten: every earlier version stays readable in the
session, and the event log says who wrote each. A file's version is the id of the
message that wrote it, so a version never repeats, not even after a delete and a
new write. Compare-and-set: the write reads the file's head and appends with
memvault's ``expect_version``, so another writer's change in between raises
``MemoryConflictError`` and writes nothing.

An operation's receipt is the session ``<namespace>:op:<operation id>``: a claim
(its fingerprint and path) appended before the write, the outcome after it. The
write's own message id is derived from the operation id, so a write that landed
before its outcome was recorded (a process killed in between) is found in the
file's session, and replaying the operation returns that outcome rather than
writing again; one that did not land is written by the replay.

``list_paths``, ``search`` and ``list_runs`` read each file's (run's) newest message,
one read per file (run) under the prefix: they suit an agent's few files and runs,
not millions. ``MetadataMemoryStore`` (``write_with_metadata``, harness 0.60+) is not
implemented.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pydantic

from memvault.aio import AsyncSession, AsyncStore
from memvault.errors import ConfigurationError, ConflictError, DuplicateMessageError
from memvault.integrations._common import missing_extra
from memvault.messages import Message, new_message_id

try:
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai_harness.memory import (
        MemoryConflictError,
        MemoryFile,
        MemoryMutation,
        MemoryOperation,
        MemoryOperationConflictError,
        MemorySearchResult,
    )
    from pydantic_ai_harness.memory import _store as _harness
    from pydantic_ai_harness.step_persistence import (
        ContinuableSnapshot,
        RunRecord,
        StepEvent,
        ToolEffectRecord,
    )
    from pydantic_ai_harness.step_persistence._store import _snapshot_key_sequence
# The optional dependency's imports, as in every adapter (names differ).
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("pydantic_ai_harness", "pydantic-ai-harness", _exc) from _exc

__all__ = ["KEY", "MemvaultMemoryStore", "MemvaultStepStore"]

KEY = "pydantic_ai_harness"
"""The metadata key of the messages of both stores (a memory write: path, operation, whether
it deleted the file; a step record: its JSON)."""
_PAGE = 500


class _HarnessStore:
    """A harness store on a memvault AsyncStore, its sessions under ``namespace``."""

    def __init__(self, async_store: AsyncStore, *, namespace: str) -> None:
        if not isinstance(async_store, AsyncStore):
            raise ConfigurationError(
                f"async_store must be a memvault.AsyncStore, not {type(async_store).__name__} "
                "(the harness's stores are async: use memvault.open_async)"
            )
        if not namespace or ":" in namespace:
            raise ConfigurationError("namespace must be a non-empty string without ':'")
        self._store, self.namespace = async_store, namespace

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r}, namespace={self.namespace!r})"

    def _session(self, kind: str, key: str) -> AsyncSession:
        return self._store.session(f"{self.namespace}:{kind}:{key}")

    async def _keys(self, kind: str, prefix: str = "") -> AsyncIterator[str]:
        """The keys of this namespace's sessions of ``kind`` starting with ``prefix``, sorted."""
        start = f"{self.namespace}:{kind}:"
        cursor = None
        while True:
            page = await self._store.sessions_page(
                _PAGE, cursor=cursor, order="id", match=start + prefix
            )
            for info in page.sessions:
                if info.session_id.startswith(start + prefix):
                    yield info.session_id[len(start) :]
            if page.cursor is None:
                return
            cursor = page.cursor


class MemvaultMemoryStore(_HarnessStore):
    """pydantic-ai-harness's ``MemoryStore`` (and ``SearchableMemoryStore``) in memvault.

    Args:
        async_store: an open :class:`memvault.AsyncStore` (left open: it is yours).
        namespace: the prefix of this memory's session ids, so one memvault store
            can hold several memories (and conversations) apart.

    Raises:
        ConfigurationError: not an AsyncStore, or a namespace with a ``:``.
    """

    def __init__(self, async_store: AsyncStore, *, namespace: str = "memory") -> None:
        super().__init__(async_store, namespace=namespace)

    def _file(self, path: str) -> AsyncSession:
        return self._session("file", path)

    def _receipts(self, operation: MemoryOperation) -> AsyncSession:
        return self._session("op", operation.id)

    async def read(self, path: str, *, max_chars: int) -> MemoryFile | None:
        """The file at ``path`` (at most ``max_chars`` of it), or None if there is none."""
        _harness.validate_store_path(path)
        if max_chars <= 0:
            raise ValueError("max_chars must be positive")
        head = await self._head(path)
        if head is None:
            return None
        content = head.content if isinstance(head.content, str) else ""
        return MemoryFile(
            content=content[:max_chars],
            version=head.id,
            operation_id=_meta(head).get("operation"),
            truncated=len(content) > max_chars,
        )

    async def _head(self, path: str) -> Message | None:
        """The message that wrote the file now at ``path``; None if none or deleted."""
        newest = await self._file(path).history(last=1)
        return newest[0] if newest and not _meta(newest[0]).get("deleted") else None

    async def get_operation(self, operation: MemoryOperation) -> MemoryMutation | None:
        """The result of ``operation`` if it was applied (``replayed``), else None.

        Raises:
            MemoryOperationConflictError: the id was used with another fingerprint.
        """
        stored = await self._receipts(operation).history()
        if not stored:
            return None
        claim = _meta(stored[0])
        if claim.get("fingerprint") != operation.fingerprint:
            raise MemoryOperationConflictError(
                f"operation id {operation.id!r} was reused with different arguments"
            )
        if len(stored) > 1:
            return _mutation(_meta(stored[-1]), replayed=True)
        # claimed, outcome unrecorded: did the write land before the process stopped?
        wrote = _operation_id(operation)
        for message in await self._file(str(claim["path"])).history():
            if message.id == wrote:
                outcome = _outcome(message)
                await self._meta(operation, outcome)
                return _mutation(outcome, replayed=True)
        return None

    async def write(
        self,
        path: str,
        content: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Create or replace ``path`` if its version is ``expected_version`` (None: absent).

        Raises:
            MemoryConflictError: the file's version is another; nothing was written.
            MemoryOperationConflictError: ``operation``'s id was used with other arguments.
        """
        _harness.validate_store_path(path)
        if not isinstance(content, str):
            raise TypeError("content must be a string")
        return await self._mutate(path, content, expected_version, operation)

    async def delete(
        self,
        path: str,
        *,
        expected_version: str | None,
        operation: MemoryOperation | None = None,
    ) -> MemoryMutation:
        """Delete ``path`` if its version is ``expected_version`` (None: it is absent).

        Raises:
            MemoryConflictError: the file's version is another; nothing was written.
        """
        _harness.validate_store_path(path)
        return await self._mutate(path, None, expected_version, operation)

    async def _mutate(
        self,
        path: str,
        content: str | None,
        expected_version: str | None,
        operation: MemoryOperation | None,
    ) -> MemoryMutation:
        if operation is not None:
            done = await self.get_operation(operation)
            if done is not None:
                return done
            await self._claim(operation, path)
        session = self._file(path)
        info = await session.info()  # before the head: a write after it makes ours conflict
        head = await self._head(path)
        if (head.id if head else None) != expected_version:
            raise MemoryConflictError(f"memory path {path!r} changed before it could be written")
        outcome: dict[str, Any] = {"path": path, "existed": head is not None}
        if operation is not None:
            outcome["operation"] = operation.id
        if content is None:
            outcome["deleted"] = True
        message = Message.system(
            content or "",
            id=new_message_id() if operation is None else _operation_id(operation),
            metadata={KEY: outcome},
        )
        try:
            await session.append([message], expect_version=0 if info is None else info.version)
        except ConflictError:
            raise MemoryConflictError(
                f"memory path {path!r} changed before it could be written"
            ) from None
        outcome = _outcome(message)
        if operation is not None:
            await self._meta(operation, outcome)
        return _mutation(outcome, replayed=False)

    async def _claim(self, operation: MemoryOperation, path: str) -> None:
        claim = Message.system(
            f"operation on {path}",
            id="claim",
            metadata={KEY: {"fingerprint": operation.fingerprint, "path": path}},
        )
        receipts = self._receipts(operation)
        await receipts.append([claim])  # a no-op if claimed before
        first = (await receipts.history())[0]
        if _meta(first).get("fingerprint") != operation.fingerprint:
            raise MemoryOperationConflictError(
                f"operation id {operation.id!r} was reused with different arguments"
            )

    async def _meta(self, operation: MemoryOperation, outcome: dict[str, Any]) -> None:
        await self._receipts(operation).append(
            [Message.system("outcome", id="outcome", metadata={KEY: outcome})]
        )

    async def list_paths(self, prefix: str = "", *, limit: int) -> list[str]:
        """The paths of the files under ``prefix``, sorted, at most ``limit`` of them."""
        _harness.validate_store_prefix(prefix)
        if limit <= 0:
            raise ValueError("limit must be positive")
        paths: list[str] = []
        async for path in self._paths(prefix):
            paths.append(path)
            if len(paths) == limit:
                break
        return paths

    async def _paths(self, prefix: str) -> AsyncIterator[str]:
        """The files under ``prefix`` (not deleted), sorted by path."""
        async for path in self._keys("file", prefix):
            if await self._head(path) is not None:
                yield path

    async def search(
        self,
        prefix: str,
        query: str,
        *,
        limit: int,
        max_files: int,
        max_chars: int,
        max_file_chars: int,
    ) -> MemorySearchResult:
        """The best lexical matches for ``query`` among the files of ``prefix``.

        Ranked and bounded by the harness's own ``lexical_search``; where the installed
        harness searches only a prefix's direct children (0.60+), so does this.
        """
        _harness.validate_store_prefix(prefix)
        if not query.split() or min(limit, max_files, max_chars, max_file_chars) <= 0:
            return MemorySearchResult(matches=[], scanned=0, truncated=False)
        direct = getattr(_harness, "is_direct_child", None)
        selected: list[tuple[str, str]] = []
        async for path in self._paths(prefix):
            if direct is not None and not direct(prefix, path):
                continue
            head = await self._head(path)
            if head is not None:
                selected.append((path, head.content if isinstance(head.content, str) else ""))
            if len(selected) > max_files:
                break
        files = selected[:max_files]
        found = _harness.lexical_search(
            [(path, text[:max_file_chars]) for path, text in files],
            query,
            limit=limit,
            max_files=max_files,
            max_chars=max_chars,
            score_prefix=prefix,
        )
        result = await found if inspect.isawaitable(found) else found
        return MemorySearchResult(
            matches=result.matches,
            scanned=result.scanned,
            truncated=result.truncated
            or len(selected) > max_files
            or any(len(text) > max_file_chars for _, text in files),
        )


_RUNS: pydantic.TypeAdapter[RunRecord] = pydantic.TypeAdapter(RunRecord)
_EVENTS: pydantic.TypeAdapter[StepEvent] = pydantic.TypeAdapter(StepEvent)
_EFFECTS: pydantic.TypeAdapter[ToolEffectRecord] = pydantic.TypeAdapter(ToolEffectRecord)
_SNAPSHOTS: pydantic.TypeAdapter[ContinuableSnapshot] = pydantic.TypeAdapter(ContinuableSnapshot)


class MemvaultStepStore(_HarnessStore):
    """pydantic-ai-harness's ``StepStore`` (step persistence) in memvault.

    A run's records are four memvault sessions, ``<namespace>:<kind>:<run id>``:
    ``run`` (its :class:`RunRecord`, the newest registration wins), ``events`` (the
    append-only step events), ``snapshots`` (the continuable snapshots, each with the
    snapshot keys' high-water mark after it) and ``effects`` (the tool-effect ledger,
    the newest record of a call wins). Each record is one message whose
    ``metadata["pydantic_ai_harness"]`` holds its JSON (a snapshot's messages as
    ``ModelMessagesTypeAdapter`` JSON), with a line of text for ``memvault show``.

    An event or snapshot with an ``idempotency_key`` is stored under an id derived
    from it, so a retried append stores it once (memvault's idempotent append); a
    snapshot key whose sequence (the number before its first ``:``) is below the
    run's highest, or equal and already seen, is suppressed, as the harness's stores
    do, and that check and the save are one compare-and-set. Snapshot retention
    (``max_snapshots_per_run``) is not implemented: every snapshot is kept.

    Args:
        async_store: an open :class:`memvault.AsyncStore` (left open: it is yours).
        namespace: the prefix of these session ids.
    """

    def __init__(self, async_store: AsyncStore, *, namespace: str = "steps") -> None:
        super().__init__(async_store, namespace=namespace)

    async def register_run(self, record: RunRecord) -> None:
        await self._add(
            "run", record.run_id, f"run {record.run_id}", _RUNS.dump_python(record, mode="json")
        )

    async def get_run(self, *, run_id: str) -> RunRecord | None:
        newest = await self._session("run", run_id).history(last=1)
        return _RUNS.validate_python(_meta(newest[0])) if newest else None

    async def list_runs(
        self, *, parent_run_id: str | None = None, conversation_id: str | None = None
    ) -> list[RunRecord]:
        """The runs registered, filtered, oldest ``started_at`` first."""
        runs = []
        async for run_id in self._keys("run"):
            record = await self.get_run(run_id=run_id)
            if (
                record is not None
                and (parent_run_id is None or record.parent_run_id == parent_run_id)
                and (conversation_id is None or record.conversation_id == conversation_id)
            ):
                runs.append(record)
        return sorted(runs, key=lambda r: r.started_at)

    async def append_event(self, event: StepEvent) -> None:
        await self._add(
            "events",
            event.run_id,
            f"{event.kind} (step {event.step_index})",
            _EVENTS.dump_python(event, mode="json"),
            key=event.idempotency_key,
        )

    async def list_events(self, *, run_id: str) -> list[StepEvent]:
        return [
            _EVENTS.validate_python(_meta(m))
            for m in await self._session("events", run_id).history()
        ]

    async def save_snapshot(self, snapshot: ContinuableSnapshot) -> None:
        """Store ``snapshot`` unless its idempotency key says it is a replay."""
        session = self._session("snapshots", snapshot.run_id)
        while True:
            info = await session.info()
            newest = await session.history(last=1)
            mark = _meta(newest[0]) if newest else {"sequence": None, "keys": []}
            key = snapshot.idempotency_key
            sequence = None if key is None else _snapshot_key_sequence(key)
            if key is not None and sequence is not None and mark["sequence"] is not None:
                if sequence < mark["sequence"] or (
                    sequence == mark["sequence"] and key in mark["keys"]
                ):
                    return
            if sequence is not None and (mark["sequence"] is None or sequence > mark["sequence"]):
                mark = {"sequence": sequence, "keys": [key]}
            elif sequence is not None:
                mark = {"sequence": mark["sequence"], "keys": [*mark["keys"], key]}
            body = _SNAPSHOTS.dump_python(replace(snapshot, messages=[]), mode="json")
            body["messages"] = ModelMessagesTypeAdapter.dump_json(snapshot.messages).decode()
            saved = _message(
                f"snapshot (step {snapshot.step_index}, {snapshot.state}, "
                f"{len(snapshot.messages)} messages)",
                body,
                key=None if key is None else f"snapshot:{key}",
            )
            try:
                await session.append(
                    [saved, _message("snapshot keys", mark)],
                    expect_version=0 if info is None else info.version,
                )
            except ConflictError:
                continue  # another save came in between: decide again
            except DuplicateMessageError:
                return  # this key's snapshot is stored: a retry
            return

    async def latest_snapshot(
        self, *, run_id: str, include_interrupted: bool = False
    ) -> ContinuableSnapshot | None:
        for snapshot in reversed(
            await self.list_snapshots(run_id=run_id, include_interrupted=True)
        ):
            if include_interrupted or snapshot.state == "complete":
                return snapshot
        return None

    async def list_snapshots(
        self, *, run_id: str, include_interrupted: bool = False
    ) -> list[ContinuableSnapshot]:
        """The run's snapshots in write order (``interrupted`` ones if asked), as the
        harness's stores give them to ``conversation_search``."""
        snapshots = []
        for message in await self._session("snapshots", run_id).history():
            body = _meta(message)
            if "step_index" not in body:
                continue  # a high-water mark
            messages = ModelMessagesTypeAdapter.validate_json(body["messages"])
            snapshot = replace(
                _SNAPSHOTS.validate_python({**body, "messages": []}), messages=messages
            )
            if include_interrupted or snapshot.state == "complete":
                snapshots.append(snapshot)
        return snapshots

    async def record_tool_effect(self, record: ToolEffectRecord) -> None:
        await self._add(
            "effects",
            record.run_id,
            f"{record.tool_name} {record.status} ({record.tool_call_id})",
            _EFFECTS.dump_python(record, mode="json"),
        )

    async def get_tool_effect(self, *, run_id: str, tool_call_id: str) -> ToolEffectRecord | None:
        return (await self._effects(run_id)).get(tool_call_id)

    async def list_unresolved_tool_effects(self, *, run_id: str) -> list[ToolEffectRecord]:
        return [r for r in (await self._effects(run_id)).values() if r.status == "started"]

    async def _effects(self, run_id: str) -> dict[str, ToolEffectRecord]:
        """Each call's newest record, in the order the calls were first recorded."""
        effects: dict[str, ToolEffectRecord] = {}
        for message in await self._session("effects", run_id).history():
            record = _EFFECTS.validate_python(_meta(message))
            effects[record.tool_call_id] = record
        return effects

    async def _add(
        self, kind: str, run_id: str, text: str, body: dict[str, Any], *, key: str | None = None
    ) -> None:
        await self._session(kind, run_id).append([_message(text, body, key=key)])


def _message(text: str, body: dict[str, Any], *, key: str | None = None) -> Message:
    """One record as a memvault message; ``key`` (an idempotency key) fixes its id."""
    return Message.system(
        text, id=new_message_id() if key is None else _id_of(key), metadata={KEY: body}
    )


def _meta(message: Message) -> dict[str, Any]:
    value = message.metadata.get(KEY)
    return value if isinstance(value, dict) else {}


def _operation_id(operation: MemoryOperation) -> str:
    """The id of the message an operation writes: the same for every replay of it."""
    return _id_of(f"op:{operation.id}")


def _id_of(key: str) -> str:
    """A memvault message id for ``key``: itself, or its digest when too long."""
    return key if len(key) <= 200 else "#" + hashlib.sha256(key.encode()).hexdigest()


def _outcome(message: Message) -> dict[str, Any]:
    """What a file message's write did: the version it made (None for a delete), and
    whether the file existed before."""
    meta = _meta(message)
    return {
        "version": None if meta.get("deleted") else message.id,
        "existed": bool(meta.get("existed")),
    }


def _mutation(outcome: dict[str, Any], *, replayed: bool) -> MemoryMutation:
    return MemoryMutation(
        version=outcome.get("version"), replayed=replayed, existed=bool(outcome.get("existed"))
    )
