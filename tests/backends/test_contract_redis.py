"""The contract suite against the shared Redis server (a database of our own), both faces."""

from __future__ import annotations

from memvault.testing import AsyncStoreContract, StoreContract
from tests.support.redis import RedisContract


class TestRedis(RedisContract, StoreContract):
    pass


class TestRedisAsync(RedisContract, AsyncStoreContract):
    pass
