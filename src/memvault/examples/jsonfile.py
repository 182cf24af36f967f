"""A worked third-party backend: the whole store in one JSON file.

Written as another package would write it, with memvault's public seams only:

- ``open_backend(url, **options)`` is what a URL reaches. The package registers it
  under the ``memvault.backends`` entry-point group (memvault's own
  ``pyproject.toml`` does so for this example)::

      [project.entry-points."memvault.backends"]
      jsonfile = "memvault.examples.jsonfile"

  and then ``memvault.open("jsonfile:///tmp/store.json")`` opens it.
- It reuses memvault's operation engine, so it provides only the storage primitives
  (the :class:`~memvault.backends.engine.core.Txn` protocol), and one transaction = load
  the file under an ``flock`` (shared to read, exclusive to write), then replace it
  atomically.

Simple and slow: every write rewrites the file. It exists to show that the contract
suite certifies a backend written outside memvault (docs/testing.md).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memvault.backends.base import Backend
from memvault.backends.engine.core import Engine, Node, Row
from memvault.backends.url import read_options, redact
from memvault.errors import BackendUnavailableError, ConfigurationError
from memvault.model import Event, Snapshot, utc

_ROW = (
    "head",
    "depth",
    "base",
    "version",
    "next_node",
    "created_at",
    "updated_at",
    "expires_at",
    "summary",
    "through",
)


class JsonTxn:
    """The engine's storage primitives over one loaded JSON document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.sessions: dict[str, Any] = doc.setdefault("sessions", {})
        self.vectors: dict[str, Any] = doc.setdefault("vectors", {"space": None, "items": {}})

    def load(self, name: str) -> Row | None:
        s = self.sessions.get(name)
        return Row(name, name, *(s["row"][k] for k in _ROW)) if s else None

    def create(self, name: str, now: float) -> Row:
        row = Row(name, name, 0, 0, 0, 0, 1, now, now, None)
        self.sessions[name] = {"row": {}, "nodes": {}, "snapshots": [], "events": []}
        self.save(row)
        return row

    def save(self, row: Row) -> None:
        self.sessions[row.name]["row"] = {k: getattr(row, k) for k in _ROW}

    def purge(self, row: Row) -> int:
        return len(self.sessions.pop(row.name)["nodes"])

    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]:
        have = {n[2] for n in self.sessions[row.name]["nodes"].values()}
        return have.intersection(ids)

    def insert_nodes(self, row: Row, nodes: Sequence[Node]) -> None:
        table = self.sessions[row.name]["nodes"]
        for n in nodes:
            table[str(n.node)] = [n.parent, n.depth, n.msg_id, n.body]

    def node(self, row: Row, node: int) -> Node | None:
        stored = self.sessions[row.name]["nodes"].get(str(node))
        return Node(node, *stored) if stored else None

    def find(self, row: Row, msg_id: str) -> Node | None:
        found = (k for k, n in self.sessions[row.name]["nodes"].items() if n[2] == msg_id)
        key = next(found, None)
        return None if key is None else self.node(row, int(key))

    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        nodes = self.sessions[row.name]["nodes"]
        out: list[Node] = []
        while len(out) < count:
            out.append(Node(head, *nodes[str(head)]))
            head = out[-1].parent
        return out

    def add_event(self, row: Row, event: Event) -> None:
        self.sessions[row.name]["events"].append(list(event.fields()))

    def events(self, row: Row) -> list[Event]:
        return [
            Event(v, op, who, utc(at), *rest)
            for v, op, who, at, *rest in self.sessions[row.name]["events"]
        ]

    def drop_events(self, row: Row, keep_last: int) -> int:
        events = self.sessions[row.name]["events"]
        dropped = max(0, len(events) - keep_last)
        del events[:dropped]
        return dropped

    def get_snapshot(self, row: Row, name: str) -> Snapshot | None:
        return next((s for s in self.snapshots(row) if s.name == name), None)

    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None:
        s = snapshot
        self.sessions[row.name]["snapshots"].append(
            [
                s.name,
                s.head,
                s.base,
                s.version,
                s.length,
                s.created_at.timestamp(),
                s.auto,
                s.summary,
                s.through,
            ]
        )

    def snapshots(self, row: Row) -> list[Snapshot]:
        return [
            Snapshot(name, head, base, version, length, utc(at), auto, *summary)
            for name, head, base, version, length, at, auto, *summary in self.sessions[row.name][
                "snapshots"
            ]
        ]

    def rows(self) -> list[Row]:
        return [row for name in list(self.sessions) if (row := self.load(name))]

    def links(self, row: Row) -> dict[int, tuple[int, int]]:
        return {int(k): (v[0], v[1]) for k, v in self.sessions[row.name]["nodes"].items()}

    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None:
        table = self.sessions[row.name]["nodes"]
        for node in nodes:
            table.pop(str(node), None)  # a concurrent compact may have deleted it

    def vector_space(self) -> str | None:
        space: str | None = self.vectors["space"]
        return space

    def set_vector_space(self, space: str, reset: bool) -> None:
        if reset:
            self.vectors["items"] = {}
        self.vectors["space"] = space

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        items = self.vectors["items"]
        return {k: base64.b64decode(items[k]) for k in keys if k in items}

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, blob in items:
            self.vectors["items"].setdefault(key, base64.b64encode(blob).decode())

    def vector_keys(self) -> list[str]:
        return list(self.vectors["items"])

    def drop_vectors(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.vectors["items"].pop(key, None)

    def bodies(self, row: Row) -> list[str]:
        return [v[3] for v in self.sessions[row.name]["nodes"].values()]


class JsonFileBackend(Engine):
    """A store kept in one JSON file, shared by threads and processes through flock.

    Args:
        path: the JSON file (created on the first write).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._closed = False

    def close(self) -> None:
        self._closed = True  # later calls raise, as every memvault store's do

    @contextlib.contextmanager
    def transaction(self, write: bool) -> Iterator[JsonTxn]:
        if self._closed:
            raise BackendUnavailableError("the store is closed")
        fd = os.open(self._lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            doc = json.loads(self.path.read_text("utf-8")) if self.path.exists() else {}
            yield JsonTxn(doc)
            if write:  # reached only when the operation did not raise
                temp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
                temp.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
                os.replace(temp, self.path)
        finally:
            os.close(fd)  # releases the lock


def open_backend(url: str, **options: Any) -> Backend:
    """Open ``jsonfile:///abs/path.json`` or ``jsonfile://relative.json`` (whatever the
    scheme: a package may register this function under a name of its own). It takes no
    option; an empty path, a query or a fragment is refused."""
    path = url.partition("://")[2]
    if not path or "#" in path:
        raise ConfigurationError(
            f"a JSON file URL is jsonfile:///abs/path.json or jsonfile://relative.json, "
            f"not {redact(url)!r}"
        )
    path, _, query = path.partition("?")
    read_options(url, query, {}, options, backend="the JSON file store")
    return JsonFileBackend(path)
