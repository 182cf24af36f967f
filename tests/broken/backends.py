"""Deliberately broken backends: each reproduces a bug memvault exists to end.

The contract suite must fail every one of them (tests/toolkit/test_known_bugs.py). They are
built on the real backends and change only the one thing that makes them wrong.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio
import redis.exceptions

from memvault.backends.base import Stored, Write
from memvault.backends.engine.core import Node, Row
from memvault.backends.memory import MemoryBackend
from memvault.backends.redis.backend import AsyncRedisBackend, settings
from memvault.backends.sqlite.backend import SqliteBackend
from memvault.backends.sqlite.schema import rowid_of
from memvault.errors import SnapshotNotFoundError
from memvault.messages import Record
from memvault.model import Snapshot


class RollbackWipesSnapshots(SqliteBackend):
    """Rollback that also clears the snapshots table: the next rollback finds no checkpoint."""

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        saved = super().rollback(session_id, name, w)
        with self.transaction(True) as txn:
            row = txn.load(session_id)
            assert row is not None
            txn._db.execute("DELETE FROM snapshots WHERE sid = ?", (row.key,))  # type: ignore[attr-defined]
        return saved


class _OverwritingTxn:
    """Inserts nodes with INSERT OR REPLACE, as a naive key-value write would."""

    def __init__(self, txn: Any) -> None:
        self._txn = txn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def insert_nodes(self, row: Row, nodes: Sequence[Node]) -> None:
        self._txn._db.executemany(
            "INSERT OR REPLACE INTO nodes (id, sid, node, parent, depth, msg_id, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (rowid_of(row.key, n.node), row.key, n.node, n.parent, n.depth, n.msg_id, n.body)
                for n in nodes
            ],
        )


class ReadModifyWriteAppend(SqliteBackend):
    """Append as read, then write what was read plus the new messages, in two steps:
    concurrent writers overwrite each other's turns."""

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        with self.transaction(False) as txn:
            row = self._live(txn, session_id, w.now)
            stored = txn.stored_ids(row, [r.id for r in records]) if row else set()
        if row is not None and len(stored) == len(records):
            return row.version
        time.sleep(0.002)  # the application's work between read and write
        with self.transaction(True) as txn:
            if row is None:
                row = txn.load(session_id) or txn.create(session_id, w.now)
            before = (row.head, row.base)
            self._add_nodes(_OverwritingTxn(txn), row, [(r.id, r.body) for r in records])  # type: ignore[arg-type]
            self._commit(txn, row, "append", w, before, {"messages": len(records)})
            return row.version


class DecoderHidesMismatch(SqliteBackend):
    """A reader that returns an empty history when a record is not in the format it
    expects (the pickle/format drift bug), instead of raising."""

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        stored = super().history(session_id, last, now, full)
        for _, body in stored:
            try:
                envelope = json.loads(body)
            except ValueError:
                return []
            if not isinstance(envelope, dict) or envelope.get("v") != 1:
                return []
        return stored


class SnapshotTtlNotRefreshed(MemoryBackend):
    """Snapshots kept under their own key whose expiry is set when written and never
    slid by later writes: a live session loses its checkpoints."""

    def __init__(self) -> None:
        super().__init__()
        self._expiry: dict[tuple[str, str], float | None] = {}

    def _gone(self, session_id: str, name: str, now: float) -> bool:
        expires = self._expiry.get((session_id, name))
        return expires is not None and expires <= now

    def snapshot(self, session_id: str, name: str, w: Write) -> Snapshot:
        snap = super().snapshot(session_id, name, w)
        self._expiry[(session_id, name)] = w.expires_at
        return snap

    def snapshots(self, session_id: str, now: float) -> list[Snapshot]:
        return [
            s for s in super().snapshots(session_id, now) if not self._gone(session_id, s.name, now)
        ]

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        if self._gone(session_id, name, w.now):
            raise SnapshotNotFoundError(f"session {session_id!r} has no snapshot {name!r}")
        saved = super().rollback(session_id, name, w)
        self._expiry[(session_id, saved.name)] = w.expires_at
        return saved


class AckBeforeCommit(SqliteBackend):
    """Acknowledges an append from a buffer that a background timer commits later
    (reads through the same handle flush it first); close() drops what is left."""

    def __init__(self, path: str, **options: Any) -> None:
        self._pending: list[tuple[str, list[Record], Write]] = []
        self._plock = threading.Lock()
        self._timer: threading.Timer | None = None
        super().__init__(path, **options)

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        with self._plock:
            info = SqliteBackend.info(self, session_id, w.now)
            queued = sum(1 for p in self._pending if p[0] == session_id)
            self._pending.append((session_id, list(records), w))
            if self._timer is None:
                self._timer = threading.Timer(0.5, self.flush)
                self._timer.daemon = True
                self._timer.start()
        return (info.version if info else 0) + queued + 1

    def flush(self) -> None:
        with self._plock:
            items, self._pending, self._timer = self._pending, [], None
        for session_id, records, w in items:
            SqliteBackend.append(self, session_id, records, None, None, w)

    def transaction(self, write: bool) -> Any:
        if self._pending and not self._plock.locked():
            self.flush()
        return super().transaction(write)

    def close(self) -> None:
        with self._plock:
            if self._timer is not None:
                self._timer.cancel()
            self._pending = []  # acknowledged, never committed
        super().close()


class _KeepsCancelledReply(redis.asyncio.Connection):
    """A connection that, cancelled while it waits for a reply, stays open with that
    reply still to come, as redis-py's asyncio connections did before 4.5.3: the pool
    hands it to the next command, which reads the cancelled command's reply as its own.
    (The pool's check for data already waiting on a connection it hands out catches
    only the replies that have arrived by then.)"""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **{**kwargs, "disconnect_on_error": False})
        except asyncio.CancelledError:
            raise  # the bug: the connection goes back to the pool, reply unread
        except redis.exceptions.ResponseError:
            raise  # an error reply, read whole: the connection stays, as in redis-py
        except BaseException:
            await self.disconnect(nowait=True)
            raise


class RedisRepliesLeftOnConnection(AsyncRedisBackend):
    """The async Redis backend on connections that keep a cancelled command's reply
    for their next user (the redis-py bug behind ChatGPT's 2023 leak of other users'
    conversation titles): after a timeout, one session reads another's messages."""

    def __init__(self, url: str, **options: Any) -> None:
        config = settings(url, **options)
        super().__init__(
            dataclasses.replace(
                config, client={**config.client, "connection_class": _KeepsCancelledReply}
            )
        )
