"""The contract suite against SQLite files, both faces."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memvault.testing import AsyncStoreContract, StoreContract


class SqliteContract:
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/memvault.db"

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        path = store.options.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:
            changed = db.execute(
                "UPDATE nodes SET body = ? WHERE depth = ? AND sid ="
                " (SELECT sid FROM sessions WHERE name = ?)",
                (body, depth, session_id),
            ).rowcount
        assert changed == 1

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        path = store.options.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:
            changed = db.execute(DAMAGE[kind], {"name": session_id, "depth": depth}).rowcount
        assert changed == 1


# How CorruptionContract.damage breaks a session.
_SID = "(SELECT sid FROM sessions WHERE name = :name)"
_FIRST = f"(SELECT min(rowid) FROM snapshots WHERE sid = {_SID})"  # the first snapshot
DAMAGE = {
    "missing": f"DELETE FROM nodes WHERE sid = {_SID} AND depth = :depth",
    "self-parent": f"UPDATE nodes SET parent = node WHERE sid = {_SID} AND depth = :depth",
    "summary": f"DELETE FROM nodes WHERE sid = {_SID} AND node ="
    f" (SELECT max(node) FROM nodes WHERE sid = {_SID} AND depth = :depth)",
    "event": f"UPDATE events SET detail = 'not json {{' WHERE sid = {_SID} AND id ="
    f" (SELECT max(id) FROM events WHERE sid = {_SID})",
    "snapshot": f"UPDATE snapshots SET created_at = 1e300 WHERE rowid = {_FIRST}",
    "snapshot-length": f"UPDATE snapshots SET length = -7 WHERE rowid = {_FIRST}",
    "snapshot-head": f"UPDATE snapshots SET head = 999 WHERE rowid = {_FIRST}",
    "snapshot-head-next": f"UPDATE snapshots SET head = (SELECT next_node FROM sessions s"
    f" WHERE s.sid = snapshots.sid) WHERE rowid = {_FIRST}",
    "snapshot-head-below-0": f"UPDATE snapshots SET head = -1 WHERE rowid = {_FIRST}",
    "snapshot-base-below-0": f"UPDATE snapshots SET base = -1 WHERE rowid = {_FIRST}",
}


class TestSqlite(SqliteContract, StoreContract):
    pass


class TestSqliteAsync(SqliteContract, AsyncStoreContract):
    pass
