"""memvault as pydantic-ai-harness's memory store: ``MemvaultMemoryStore``.

>>> store = MemvaultMemoryStore(memvault.open_async("sqlite:///memory.db"))  # doctest: +SKIP
>>> agent = Agent(model, capabilities=[Memory(store=store)])                 # doctest: +SKIP

``MemvaultMemoryStore`` implements the harness's ``MemoryStore`` and
``SearchableMemoryStore`` protocols (``read``, ``get_operation``, ``write``,
``delete``, ``list_paths``, ``search``) on a :class:`memvault.AsyncStore`, on every
backend: versioned memory files, compare-and-set writes, and operation receipts
that make a replayed write (a retried tool call) apply once.

How it is stored. A memory file is the memvault session ``<namespace>:file:<path>``;
each write appends one message holding the file's new content (its text, so
``memvault show`` and ``search`` read it), each delete a tombstone. Nothing is
overwritten: every earlier version stays readable in the session, and the event log
says who wrote each. A file's version is the id of the message that wrote it, so a
version never repeats, not even after a delete and a new write. Compare-and-set:
the write reads the file's head and appends with memvault's ``expect_version``, so
another writer's change in between raises ``MemoryConflictError`` and writes
nothing.

An operation's receipt is the session ``<namespace>:op:<operation id>``: a claim
(its fingerprint and path) appended before the write, the outcome after it. The
write's own message id is derived from the operation id, so a write that landed
before its outcome was recorded (a process killed in between) is found in the
file's session, and replaying the operation returns that outcome rather than
writing again; one that did not land is written by the replay.

``list_paths`` and ``search`` read each file's newest message (one read per file
under the prefix), which suits the few files of an agent's memory, not millions.
``MetadataMemoryStore`` (``write_with_metadata``, harness 0.60+) is not implemented.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

from memvault.aio import AsyncSession, AsyncStore
from memvault.errors import ConfigurationError, ConflictError
from memvault.integrations._common import missing_extra
from memvault.messages import Message, new_message_id

try:
    from pydantic_ai_harness.memory import (
        MemoryConflictError,
        MemoryFile,
        MemoryMutation,
        MemoryOperation,
        MemoryOperationConflictError,
        MemorySearchResult,
    )
    from pydantic_ai_harness.memory import _store as _harness
# The optional dependency's imports, as in every adapter (names differ).
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("pydantic_ai_harness", "pydantic-ai-harness", _exc) from _exc

__all__ = ["KEY", "MemvaultMemoryStore"]

KEY = "harness_memory"
"""The metadata key of a memory message: path, operation, whether it deleted the file."""
_PAGE = 500


class MemvaultMemoryStore:
    """pydantic-ai-harness's ``MemoryStore`` (and ``SearchableMemoryStore``) in memvault.

    Args:
        async_store: an open :class:`memvault.AsyncStore` (left open: it is yours).
        namespace: the prefix of this memory's session ids, so one memvault store
            can hold several memories (and conversations) apart.

    Raises:
        ConfigurationError: not an AsyncStore, or a namespace with a ``:``.
    """

    def __init__(self, async_store: AsyncStore, *, namespace: str = "memory") -> None:
        if not isinstance(async_store, AsyncStore):
            raise ConfigurationError(
                f"async_store must be a memvault.AsyncStore, not {type(async_store).__name__} "
                "(the harness's stores are async: use memvault.open_async)"
            )
        if not namespace or ":" in namespace:
            raise ConfigurationError("namespace must be a non-empty string without ':'")
        self._store, self.namespace = async_store, namespace

    def __repr__(self) -> str:
        return f"MemvaultMemoryStore({self._store!r}, namespace={self.namespace!r})"

    def _file(self, path: str) -> AsyncSession:
        return self._store.session(f"{self.namespace}:file:{path}")

    def _receipts(self, operation: MemoryOperation) -> AsyncSession:
        return self._store.session(f"{self.namespace}:op:{operation.id}")

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
                await self._record(operation, outcome)
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
            await self._record(operation, outcome)
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

    async def _record(self, operation: MemoryOperation, outcome: dict[str, Any]) -> None:
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
        start = f"{self.namespace}:file:"
        cursor = None
        while True:
            page = await self._store.sessions_page(
                _PAGE, cursor=cursor, order="id", match=start + prefix
            )
            for info in page.sessions:
                if info.session_id.startswith(start + prefix):
                    path = info.session_id[len(start) :]
                    if await self._head(path) is not None:
                        yield path
            if page.cursor is None:
                return
            cursor = page.cursor

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


def _meta(message: Message) -> dict[str, Any]:
    value = message.metadata.get(KEY)
    return value if isinstance(value, dict) else {}


def _operation_id(operation: MemoryOperation) -> str:
    """The id of the message an operation writes: the same for every replay of it."""
    if len(operation.id) <= 200:
        return f"op:{operation.id}"
    return "op#" + hashlib.sha256(operation.id.encode()).hexdigest()


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
