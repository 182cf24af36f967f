"""The contract suite against memory://, both faces."""

from __future__ import annotations

import pytest

from memvault.testing import AsyncStoreContract, StoreContract

# memory:// is private to one process and one open: nothing to share or reopen.
MEMORY = frozenset({"ttl"})


class TestMemory(StoreContract):
    capabilities = MEMORY

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"


class TestMemoryAsync(AsyncStoreContract):
    capabilities = MEMORY

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
