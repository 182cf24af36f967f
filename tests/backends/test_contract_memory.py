"""The contract suite against memory://, both faces."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from memvault.backends.engine.core import Node
from memvault.backends.memory import MemoryBackend
from memvault.testing import CHAIN_DAMAGE, AsyncStoreContract, StoreContract

# memory:// is private to one process and one open: nothing to share or reopen.
MEMORY = frozenset({"ttl", "corrupt", "vectors"})
SNAPSHOT_FIELDS = {
    "snapshot-length": {"length": -7},
    "snapshot-head": {"head": 999},
    "snapshot-head-below-0": {"head": -1},
    "snapshot-base-below-0": {"base": -1},
    "snapshot-head-next": {},
}


class MemoryContract:
    """Damage reaches into the backend's dictionaries; events and snapshots are kept
    as objects, not encoded, so they cannot be damaged."""

    @staticmethod
    def _nodes(store: Any, session_id: str) -> Any:
        backend = store.backend
        backend = getattr(backend, "backend", backend)  # the async face's thread wrapper
        assert isinstance(backend, MemoryBackend)
        return backend._data[session_id]

    def _at(self, store: Any, session_id: str, depth: int) -> tuple[Any, Node]:
        session = self._nodes(store, session_id)
        [node] = [n for n in session.nodes.values() if n.depth == depth]
        return session, node

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        if isinstance(body, bytes):
            pytest.skip("memory:// keeps bodies as str")
        session, node = self._at(store, session_id, depth)
        session.nodes[node.node] = node._replace(body=body)

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        if kind not in (*CHAIN_DAMAGE, "summary", *SNAPSHOT_FIELDS):
            pytest.skip("memory:// keeps events and snapshots as objects")
        if kind in SNAPSHOT_FIELDS:
            session = self._nodes(store, session_id)
            first = next(iter(session.snapshots.values()))
            session.snapshots[first.name] = dataclasses.replace(
                first, **SNAPSHOT_FIELDS[kind] or {"head": session.row.next_node}
            )
            return
        if kind == "summary":
            session = self._nodes(store, session_id)
            del session.nodes[max(n.node for n in session.nodes.values() if n.depth == depth)]
            return
        session, node = self._at(store, session_id, depth)
        if kind == "missing":
            del session.nodes[node.node]
        else:
            session.nodes[node.node] = node._replace(parent=node.node)


class TestMemory(MemoryContract, StoreContract):
    capabilities = MEMORY

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"


class TestMemoryAsync(MemoryContract, AsyncStoreContract):
    capabilities = MEMORY

    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
