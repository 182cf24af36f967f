"""The contract suite against the shared Redis server (a database of our own), both faces."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.testing import AsyncStoreContract, StoreContract
from tests.support.redis import corrupt, flushed


class RedisContract:
    @pytest.fixture
    def store_url(self) -> str:
        return flushed()

    def corrupt(self, store: Any, session_id: str, depth: int, body: str) -> None:
        corrupt(store.options.url, session_id, depth, body)


class TestRedis(RedisContract, StoreContract):
    pass


class TestRedisAsync(RedisContract, AsyncStoreContract):
    pass
