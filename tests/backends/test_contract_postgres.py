"""The contract suite against PostgreSQL (a fresh schema per test), both faces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memvault.testing import AsyncStoreContract, StoreContract
from tests.support.postgres import corrupt, damage, postgres_url


class PostgresContract:
    @pytest.fixture
    def store_url(self, request: pytest.FixtureRequest, tmp_path: Path) -> str:
        return postgres_url(request, tmp_path)

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        if isinstance(body, bytes):
            pytest.skip("a PostgreSQL text column holds only UTF-8")
        corrupt(store.options.url, session_id, depth, body)

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        damage(store.options.url, session_id, depth, kind)


class TestPostgres(PostgresContract, StoreContract):
    pass


class TestPostgresAsync(PostgresContract, AsyncStoreContract):
    pass
