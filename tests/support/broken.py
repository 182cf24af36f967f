"""Deliberately broken backends: the torture and crash tests must catch each one.

Each is the SQLite backend with one bug users have met in production. They are
module-level classes, so worker processes can open them from a pickled Opener.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from memvault.backends.base import Write
from memvault.backends.sqlite.backend import SqliteBackend
from memvault.errors import BackendUnavailableError
from memvault.messages import Record
from memvault.model import Snapshot


class LosingBackend(SqliteBackend):
    """Acknowledges every fourth append of each process without storing it (a write
    acknowledged before it was flushed, then lost)."""

    appends = 0

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        LosingBackend.appends += 1
        if LosingBackend.appends % 4 == 0:
            info = self.info(session_id, w.now)
            return (info.version if info else 0) + 1
        return super().append(session_id, records, expect_version, expect_message, w)


class SnapshotWipingBackend(SqliteBackend):
    """Rollback that also wipes the session's snapshots table, so the next rollback
    finds no checkpoint."""

    def rollback(self, session_id: str, name: str, w: Write) -> Snapshot:
        saved = super().rollback(session_id, name, w)
        with self.transaction(True) as txn:
            txn._db.execute(
                "DELETE FROM snapshots WHERE auto = 0 AND sid IN"
                " (SELECT sid FROM sessions WHERE name = ?)",
                (session_id,),
            )
        return saved


class TearingBackend(SqliteBackend):
    """Stores a batch one message per transaction, so another writer's turn can land
    in the middle of it (a read-modify-write append split in two)."""

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        version = 0
        for i, record in enumerate(records):
            if i:
                time.sleep(0.02)
            version = super().append(session_id, [record], expect_version, expect_message, w)
        return version


class RefusingBackend(SqliteBackend):
    """Refuses every append as unavailable (a store that is down for the whole run):
    nothing is acknowledged, so a run on it has checked nothing."""

    def append(
        self,
        session_id: str,
        records: Sequence[Record],
        expect_version: int | None,
        expect_message: str | None,
        w: Write,
    ) -> int:
        raise BackendUnavailableError("the store is down (RefusingBackend)")
