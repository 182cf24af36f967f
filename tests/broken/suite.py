"""The contract suite pointed at each broken backend, as a third party would.

Not collected by the default run (the name does not start with ``test_``):
tests/toolkit/test_known_bugs.py runs it in a subprocess and asserts that it fails.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings

from memvault.testing import AsyncStoreContract, StoreContract
from tests.broken import backends
from tests.support.redis import RedisContract

# A broken backend is expected to fail: finding the failure is the point, shrinking
# it to the shortest example would only cost minutes.
settings.register_profile("broken-backends", phases=[Phase.explicit, Phase.generate])
settings.load_profile("broken-backends")


class SqliteFile:
    """A broken backend built on SQLite: factory, and the corrupt() hook."""

    backend: Any

    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> Any:
        return functools.partial(self.backend, str(tmp_path / "broken.db"))

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        with sqlite3.connect(store.backend.path) as db:
            db.execute(
                "UPDATE nodes SET body = ? WHERE depth = ? AND sid ="
                " (SELECT sid FROM sessions WHERE name = ?)",
                (body, depth, session_id),
            )


class TestRollbackWipesSnapshots(SqliteFile, StoreContract):
    backend = backends.RollbackWipesSnapshots


class TestReadModifyWriteAppend(SqliteFile, StoreContract):
    backend = backends.ReadModifyWriteAppend


class TestDecoderHidesMismatch(SqliteFile, StoreContract):
    backend = backends.DecoderHidesMismatch


class TestAckBeforeCommit(SqliteFile, StoreContract):
    backend = backends.AckBeforeCommit


class TestSnapshotTtlNotRefreshed(StoreContract):
    capabilities = frozenset({"ttl"})

    @pytest.fixture
    def backend_factory(self) -> Any:
        return backends.SnapshotTtlNotRefreshed


class TestRedisRepliesLeftOnConnection(RedisContract, AsyncStoreContract):
    @pytest.fixture
    def async_backend_factory(self, store_url: str) -> Any:
        return functools.partial(backends.RedisRepliesLeftOnConnection, store_url)
