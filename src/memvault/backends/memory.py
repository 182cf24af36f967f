"""The in-memory backend (``memory://``): the reference model.

Each :func:`memvault.open` of ``memory://`` is a fresh, empty store private to the
process. One lock serializes every operation. Rows are copied in and out, so a
caller never holds a reference into the store.

Search: a BM25 inverted index (:class:`~memvault.backends.engine.lexical.WordIndex`) over
every stored node, written by
the same call that stores the node; statistics (document count, average length,
document frequencies) are the whole store's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.backends.base import Backend
from memvault.backends.engine.core import Node, Row
from memvault.backends.engine.lexical import IndexedEngine, WordIndex
from memvault.backends.url import read_options, redact
from memvault.errors import BackendUnavailableError, ConfigurationError
from memvault.model import Event, Snapshot

PROCESS_LOCAL = True
"""Each open is a store private to its process: two processes cannot share one."""


@dataclass
class _Session:
    row: Row
    nodes: dict[int, Node] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    summaries: set[int] = field(default_factory=set)


@dataclass
class _Vectors:
    space: str | None = None
    items: dict[str, bytes] = field(default_factory=dict)


class _MemoryTxn:
    def __init__(self, data: dict[str, _Session], index: WordIndex, vectors: _Vectors) -> None:
        self._data = data
        self._index = index
        self._vectors = vectors

    def load(self, name: str) -> Row | None:
        s = self._data.get(name)
        return dataclasses.replace(s.row) if s else None

    def create(self, name: str, now: float) -> Row:
        row = Row(name, name, 0, 0, 0, 0, 1, now, now, None)
        self._data[name] = _Session(dataclasses.replace(row))
        return row

    def save(self, row: Row) -> None:
        self._data[row.name].row = dataclasses.replace(row)

    def purge(self, row: Row) -> int:
        nodes = self._data.pop(row.name).nodes
        for node in nodes:
            self._index.remove((row.name, node))
        return len(nodes)

    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]:
        return self._data[row.name].ids.keys() & set(ids)

    def insert_nodes(self, row: Row, nodes: Sequence[Node], summary: bool = False) -> None:
        s = self._data[row.name]
        for n in nodes:
            s.nodes[n.node] = n
            s.ids[n.msg_id] = n.node
            self._index.add((row.name, n.node), summary, n.body)
            if summary:
                s.summaries.add(n.node)

    def node(self, row: Row, node: int) -> Node | None:
        return self._data[row.name].nodes.get(node)

    def find(self, row: Row, msg_id: str) -> Node | None:
        s = self._data[row.name]
        node = s.ids.get(msg_id)
        return None if node is None else s.nodes[node]

    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        nodes, out = self._data[row.name].nodes, list[Node]()
        while len(out) < count and head in nodes:
            out.append(nodes[head])
            head = nodes[head].parent
        return out

    def add_event(self, row: Row, event: Event) -> None:
        self._data[row.name].events.append(event)

    def events(self, row: Row) -> list[Event]:
        return list(self._data[row.name].events)

    def drop_events(self, row: Row, keep_last: int) -> int:
        events = self._data[row.name].events
        dropped = max(0, len(events) - keep_last)
        del events[:dropped]
        return dropped

    def get_snapshot(self, row: Row, name: str) -> Snapshot | None:
        return self._data[row.name].snapshots.get(name)

    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None:
        self._data[row.name].snapshots[snapshot.name] = snapshot

    def snapshots(self, row: Row) -> list[Snapshot]:
        return list(self._data[row.name].snapshots.values())

    def rows(self) -> list[Row]:
        return [dataclasses.replace(s.row) for s in self._data.values()]

    def links(self, row: Row) -> dict[int, tuple[int, int]]:
        return {n.node: (n.parent, n.depth) for n in self._data[row.name].nodes.values()}

    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None:
        s = self._data[row.name]
        for node in nodes:
            if node in s.nodes:  # not deleted by a concurrent compact
                del s.ids[s.nodes.pop(node).msg_id]
                s.summaries.discard(node)
                self._index.remove((row.name, node))

    def vector_space(self) -> str | None:
        return self._vectors.space

    def set_vector_space(self, space: str, reset: bool) -> None:
        if reset:
            self._vectors.items.clear()
        self._vectors.space = space

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        items = self._vectors.items
        return {k: items[k] for k in keys if k in items}

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, blob in items:
            self._vectors.items.setdefault(key, blob)

    def vector_keys(self) -> list[str]:
        return list(self._vectors.items)

    def drop_vectors(self, keys: Sequence[str]) -> None:
        for key in keys:
            self._vectors.items.pop(key, None)

    def bodies(self, row: Row) -> list[str]:
        return [n.body for n in self._data[row.name].nodes.values()]

    def matches(
        self, row: Row | None, terms: Sequence[str]
    ) -> Iterator[tuple[int | str, int, bool, float]]:
        return iter(self._index.rank(None if row is None else row.name, terms))

    def message_count(self, row: Row) -> int:
        s = self._data[row.name]
        return len(s.nodes) - len(s.summaries)

    def ancestors(self, row: Row, head: int, count: int) -> list[int]:
        return [n.node for n in self.chain(row, head, count)]


class MemoryBackend(IndexedEngine):
    """A process-local store behind one lock."""

    def __init__(self) -> None:
        self._data: dict[str, _Session] = {}
        self._index = WordIndex()
        self._vectors = _Vectors()
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def transaction(self, write: bool) -> Iterator[_MemoryTxn]:
        with self._lock:
            if self._closed:
                raise BackendUnavailableError("the store is closed")
            yield _MemoryTxn(self._data, self._index, self._vectors)

    def close(self) -> None:
        """Refuse every later call, as the other backends do."""
        with self._lock:
            self._closed = True


def open_backend(url: str, **options: Any) -> Backend:
    """Open ``memory://`` (it takes no path, host or option)."""
    if url.rstrip("/") != "memory:":
        raise ConfigurationError(
            f"the memory store takes no path or host: use 'memory://', not {redact(url)!r}"
        )
    read_options(url, "", {}, options, backend="the memory store")
    return MemoryBackend()
