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

    def corrupt(self, store: Any, session_id: str, depth: int, body: str) -> None:
        path = store.options.url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:
            changed = db.execute(
                "UPDATE nodes SET body = ? WHERE depth = ? AND sid ="
                " (SELECT sid FROM sessions WHERE name = ?)", (body, depth, session_id)).rowcount
        assert changed == 1


class TestSqlite(SqliteContract, StoreContract):
    pass


class TestSqliteAsync(SqliteContract, AsyncStoreContract):
    pass
