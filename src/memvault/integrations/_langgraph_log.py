"""How a LangGraph thread is stored in a memvault session (sans-I/O).

A thread is one session, ``langgraph:<thread_id>``, holding every namespace of the
thread, so deleting, copying (fork) and expiring (TTL) a thread are each one
memvault operation. Every saver write is one append of one node (a
:class:`~memvault.Message`): the session's chain is the log of what the saver did,
and memvault's event log says which writer did it. A node's ``metadata["langgraph"]``
is one of:

- ``checkpoint``: the checkpoint without its channel values (through the saver's
  ``serde``), its metadata (same), its namespace, id and parent id, and one entry
  per channel value:

  - ``{"t", "b"}``: the whole value (``serde.dumps_typed``; bytes in base64);
  - ``{"at": node}``: the same value as the one stored for this channel by checkpoint
    node ``node`` (an unchanged channel);
  - ``{"ext": node, "n": k, "t", "b"}``: the value of node ``node`` (a list of ``k``
    items) followed by the stored suffix (a list that grew, such as ``messages``).

  So a growing ``messages`` channel costs its new messages per step, not the whole
  history. A value is shared only if it equals the parent's item by item, each item
  of the same type; anything else (a removal, an edit) is stored whole.
- ``writes``: the writes of one ``put_writes`` call (task id, task path and, per
  write, its index, channel and value).
- ``prune`` / ``forget_runs``: markers that hide, from that point on, the
  checkpoints appended before them that they name (``prune`` keeps the ``keep``
  nodes, ``forget_runs`` hides the checkpoints of ``runs``). Hidden checkpoints are
  not listed nor returned, but stay stored: later checkpoints whose values refer
  to them, and a ``DeltaChannel`` whose history runs through them, still read.

Node ids hash the node's namespace, checkpoint id and body, so retrying a write
with the same bytes is a no-op (memvault's idempotent append) and a node id always
names exactly one content. When a checkpoint id was put twice with different bytes,
the first one counts. Writes resolve like LangGraph's own savers: per
``(task_id, index)``, the first regular write wins, the last special one
(``WRITES_IDX_MAP``: errors, interrupts, ...) wins.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from memvault.errors import CorruptRecordError
from memvault.integrations._langgraph_values import MISSING, Grown, Lru, fresh, is_model
from memvault.messages import Message, constructed, new_message_id

PREFIX = "langgraph:"
KEY = "langgraph"
Body = dict[str, Any]


def session_id(thread_id: str) -> str:
    """The memvault session of a LangGraph thread."""
    return PREFIX + str(thread_id)


# json.dumps(sort_keys=True), made once; a body has no cycles to look for
_SORTED = json.JSONEncoder(sort_keys=True, check_circular=False)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(_SORTED.encode(parts).encode()).hexdigest()[:48]


def pack(typed: tuple[str, bytes]) -> dict[str, str]:
    """A ``serde.dumps_typed`` pair as JSON."""
    return {"t": typed[0], "b": base64.b64encode(typed[1]).decode("ascii")}


def unpack(entry: Mapping[str, Any]) -> tuple[str, bytes]:
    """The ``serde.loads_typed`` pair of a :func:`pack`-ed entry."""
    return str(entry["t"]), base64.b64decode(entry["b"], validate=True)


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are equal and of the same type (1 is not True here).

    Pydantic models (LangChain's messages) compare by their fields' dict, extra and
    private values: what they serialize from, and several times faster than their
    ``__eq__``, which matters when a put checks a thousand messages.
    """
    try:
        if type(a) is not type(b):
            return False
        if is_model(type(a)):
            return bool(
                a.__dict__ == b.__dict__
                and a.__pydantic_extra__ == b.__pydantic_extra__
                and a.__pydantic_private__ == b.__pydantic_private__
            )
        return bool(a == b)
    except Exception:  # a value whose == raises or is not a bool: not shared
        return False


def _extends(old: Any, new: Any) -> bool:
    """``new`` is the list ``old`` followed by more items (same types, equal items)."""
    if type(old) is not list or type(new) is not list or len(old) >= len(new):
        return False
    for x, y in zip(old, new, strict=False):  # a loop: cheaper than all() of a generator
        if not _same(x, y):
            return False
    return True


@dataclass(frozen=True)
class Stored:
    """One stored channel value and the node holding it. ``value`` is private: a
    decoded value (read) or a :func:`fresh` copy of what a put was given, kept to
    compare a child's value with, never handed out."""

    value: Any
    node: str


def encode_values(
    values: Mapping[str, Any], parent: Mapping[str, Stored], serde: SerializerProtocol
) -> tuple[Body, dict[str, Stored], dict[str, Any]]:
    """The entries of a checkpoint's channel values.

    ``parent`` is what the parent checkpoint stores per channel (empty if none is
    known). Returns the entries, the channels shared with the parent (what it
    stores), and private copies of the values this node stores itself: copies, not
    decodings of the entries, which only a read needs (a value equal to its
    encoding's decoding compares with a child as that decoding does).
    """
    entries: Body = {}
    shared: dict[str, Stored] = {}
    own: dict[str, Any] = {}
    for channel, value in values.items():
        old = parent.get(channel)
        if old is not None and _same(old.value, value):
            entries[channel] = {"at": old.node}
            shared[channel] = old
        elif old is not None and _extends(old.value, value):
            n = len(old.value)
            entries[channel] = {"ext": old.node, "n": n, **pack(serde.dumps_typed(value[n:]))}
            own[channel] = old.value + fresh(value[n:])
        else:
            entries[channel] = pack(serde.dumps_typed(value))
            own[channel] = fresh(value)
    return entries, shared, own


def _node(node: str, content: str, body: Body) -> Message:
    """A saver's node. Built without pydantic's validation, which its fields (strings
    and this module's JSON) do not need: the append checks it again as it encodes it
    (:func:`memvault.messages.encode_message`), once instead of twice."""
    return constructed(
        id=node,
        role="system",
        content=content,
        metadata={KEY: body},
        created_at=datetime.now(timezone.utc),
    )


def checkpoint_message(
    ns: str,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    parent_id: str | None,
    parent: Mapping[str, Stored],
    serde: SerializerProtocol,
) -> tuple[Message, dict[str, Stored]]:
    """The node that stores ``checkpoint``, and what it stores per channel."""
    skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    run = metadata.get("run_id")
    entries, stored, own = encode_values(checkpoint["channel_values"], parent, serde)
    body: Body = {
        "kind": "checkpoint",
        "ns": ns,
        "id": checkpoint["id"],
        "parent": parent_id,
        "run": run if isinstance(run, str) else None,
        "checkpoint": pack(serde.dumps_typed(skeleton)),
        "metadata": pack(serde.dumps_typed(metadata)),
        "values": entries,
    }
    node = "lg-c-" + _digest(body)
    stored.update({channel: Stored(value, node) for channel, value in own.items()})
    where = f" in {ns!r}" if ns else ""
    content = (
        f"checkpoint {checkpoint['id']}{where}: step {metadata.get('step')}, "
        f"{metadata.get('source')}; stored: {', '.join(own) or 'nothing new'}"
    )
    return _node(node, content, body), stored


def writes_message(
    ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[str, Any]],
    serde: SerializerProtocol,
) -> Message:
    """The node that stores one ``put_writes`` call."""
    items = [
        {"i": WRITES_IDX_MAP.get(channel, i), "c": channel, **pack(serde.dumps_typed(v))}
        for i, (channel, v) in enumerate(writes)
    ]
    body: Body = {
        "kind": "writes",
        "ns": ns,
        "cp": checkpoint_id,
        "task": task_id,
        "path": task_path,
        "w": items,
    }
    channels = ", ".join(dict.fromkeys(str(w["c"]) for w in items))
    return _node(
        "lg-w-" + _digest(body),
        f"writes of task {task_id} on checkpoint {checkpoint_id}: {channels}",
        body,
    )


def marker_message(kind: str, names: Sequence[str], reason: str) -> Message:
    """A ``prune`` marker (``names``: the kept nodes) or ``forget_runs`` (the run ids)."""
    field = "keep" if kind == "prune" else "runs"
    body: Body = {"kind": kind, field: sorted(names)}
    return _node(new_message_id(), reason, body)


Entry = tuple[str, "Body | None"]  # a node of the chain: its id and LangGraph body


def entries(messages: Sequence[Message]) -> list[Entry]:
    """The chain's nodes as (id, body); None for another writer's message."""
    return [(m.id, b if isinstance(b := m.metadata.get(KEY), dict) else None) for m in messages]


class ThreadLog:
    """A thread as read back: its checkpoints, writes and markers, indexed.

    Values: :meth:`value` decodes a channel's value once per node and keeps it in
    ``values`` (shared by the saver's logs, keyed by session, node and channel; a
    node's value never changes), decoding only the suffixes stored after the
    newest node it holds; what the log hands out (:meth:`tuple`,
    :meth:`delta_history`) are :func:`fresh` copies of those values.

    A saver keeps the log of the threads it read last (node bodies never change)
    and brings it up to date with :meth:`extended` and the nodes appended since
    (the session's newest ``info().length - length`` nodes, checked to follow
    the last one it holds: a node's ancestors are fixed, so the chain before it is
    the one already indexed). A rollback, or a writer racing the two reads, fails
    that check and the saver reads the whole chain instead.

    Raises CorruptRecordError (naming the session and the node's position) for a
    node whose body is not what this module writes, or, when its value is read, a
    reference to a node the session does not hold before it (for instance hidden by
    a memvault trim).
    """

    def __init__(
        self,
        thread_id: str,
        chain: Sequence[Entry],
        serde: SerializerProtocol,
        values: Lru,
        stamp: Any = None,
    ) -> None:
        self.thread_id = thread_id
        self.serde = serde
        self.values = values
        self.session = session_id(thread_id)
        self.stamp = stamp  # the session's (created_at, version) when read, if known
        self.length = 0  # the chain's nodes (other writers' messages too)
        self.last: str | None = None  # the newest of them
        # Indexes that the logs extended from this one share most of (Grown)
        self.nodes: Grown[str, Body] = Grown()
        self.depth: Grown[str, int] = Grown()
        self.first: Grown[tuple[str, str], str] = Grown()  # (ns, checkpoint id) -> node
        self.writes: Grown[tuple[str, str], list[Body]] = Grown()
        self.hidden: frozenset[str] = frozenset()
        self.newest: dict[str, str] = {}  # ns -> its visible node of the highest checkpoint id
        self.broken: Grown[tuple[str, str], str] = Grown()  # (node, channel) -> why unreadable
        self._load(chain)

    def extended(self, newer: Sequence[Entry], stamp: Any) -> ThreadLog:
        """A new log: this one followed by ``newer`` (this one is left unchanged)."""
        log = ThreadLog.__new__(ThreadLog)
        log.__dict__ = {
            **self.__dict__,
            "stamp": stamp,
            "nodes": self.nodes.copy(),
            "depth": self.depth.copy(),
            "first": self.first.copy(),
            "writes": self.writes.copy(),
            "broken": self.broken.copy(),
            "newest": self.newest.copy(),
        }
        log._load(newer)
        return log

    def _load(self, chain: Sequence[Entry]) -> None:
        for node, body in chain:
            self.length += 1
            self.last = node
            if body is None:
                continue  # another writer's message: not LangGraph's
            try:
                self._add(node, body)
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptRecordError(
                    self.session, self.length, f"bad LangGraph node: {exc!r}"
                ) from exc
            self.depth[node] = self.length

    def _add(self, node: str, body: Body) -> None:
        kind = body["kind"]
        if kind == "checkpoint":
            key = (str(body["ns"]), str(body["id"]))
            self._check_refs(node, body["values"])
            self.nodes[node] = body
            if self.first.setdefault(key, node) == node:  # a new node is never hidden
                self._consider(key, node)
        elif kind == "writes":
            key = (str(body["ns"]), str(body["cp"]))
            self.writes[key] = [*self.writes.get(key, ()), body]  # lists may be shared
        elif kind == "prune":
            keep = set(body["keep"])
            self.hidden = self.hidden | {n for n in self.nodes if n not in keep}
            self._renew()
        elif kind == "forget_runs":
            runs = set(body["runs"])
            self.hidden = self.hidden | {n for n, b in self.nodes.items() if b.get("run") in runs}
            self._renew()
        else:
            raise ValueError(f"unknown kind {kind!r}")

    def _check_refs(self, node: str, values: Mapping[str, Body]) -> None:
        """Note the channels of ``node`` whose value refers to a node not held before it
        (or to one that cannot be read itself): reading them raises, the rest reads."""
        for channel, entry in values.items():
            ref = entry.get("at") or entry.get("ext")
            if ref is None:
                continue
            held = self.nodes.get(str(ref))
            if held is None or channel not in held["values"]:
                self.broken[(node, channel)] = f"channel {channel!r} refers to missing node {ref!r}"
            elif (str(ref), channel) in self.broken:
                self.broken[(node, channel)] = self.broken[(str(ref), channel)]

    def _consider(self, key: tuple[str, str], node: str) -> None:
        """Keep ``newest`` up to date with the visible checkpoint ``key`` at ``node``."""
        ns, checkpoint_id = key
        newest = self.newest.get(ns)
        if newest is None or str(self.nodes[newest]["id"]) < checkpoint_id:
            self.newest[ns] = node

    def _renew(self) -> None:
        """Make ``newest`` again after a marker hid checkpoints (rare: not incremental)."""
        self.newest = {}
        for key, node in self.first.items():
            if node not in self.hidden:
                self._consider(key, node)

    def find(self, ns: str, checkpoint_id: str | None) -> str | None:
        """The visible node of a checkpoint, or of the newest one of ``ns`` if no id."""
        if checkpoint_id is None:
            return self.newest.get(ns)
        node = self.first.get((ns, checkpoint_id))
        return node if node is not None and node not in self.hidden else None

    def listed(self, ns: str | None) -> list[str]:
        """Visible checkpoint nodes (of ``ns``, or all), newest checkpoint id first."""
        found = [
            n
            for (n_ns, _), n in self.first.items()
            if (ns is None or n_ns == ns) and n not in self.hidden
        ]
        return sorted(found, key=lambda n: str(self.nodes[n]["id"]), reverse=True)

    def _fail(self, node: str, reason: str) -> CorruptRecordError:
        return CorruptRecordError(self.session, self.depth.get(node, 0), reason)

    def value(self, node: str, channel: str) -> Any:
        """The value of ``channel`` at checkpoint node ``node``: the canonical one, kept
        in :attr:`values` (never hand it out: give a :func:`fresh` copy)."""
        if (node, channel) in self.broken:
            raise self._fail(node, self.broken[(node, channel)])
        key = (self.session, node, channel)
        value = self.values.get(key)
        if value is not MISSING:
            return value
        suffixes: list[tuple[str, Body]] = []  # the ext entries above the base, newest first
        at, entry = node, self.nodes[node]["values"][channel]
        while "at" in entry or "ext" in entry:
            if "ext" in entry:
                suffixes.append((at, entry))
            at = str(entry.get("at") or entry["ext"])
            entry = self.nodes[at]["values"][channel]
            value = self.values.get((self.session, at, channel))
            if value is not MISSING:
                break
        else:
            value = self.serde.loads_typed(unpack(entry))
        for i, (at, ext) in enumerate(reversed(suffixes)):
            if not isinstance(value, list) or len(value) != ext["n"]:
                raise self._fail(at, f"channel {channel!r} does not extend its base")
            more = self.serde.loads_typed(unpack(ext))
            if i:
                value.extend(more)
            else:  # the base may be another node's canonical value: a new list
                value = [*value, *more]
        self.values.put(key, value)
        return value

    def stored(self, node: str) -> dict[str, Stored]:
        """What checkpoint node ``node`` stores per channel (for a child's encoding)."""
        result = {}
        for channel, entry in self.nodes[node]["values"].items():
            holder = str(entry["at"]) if "at" in entry else node
            result[channel] = Stored(self.value(node, channel), holder)
        return result

    def pending(self, ns: str, checkpoint_id: str) -> list[PendingWrite]:
        """The writes on a checkpoint, resolved and in ``writes_sort_key`` order."""
        chosen: dict[tuple[str, int], tuple[str, Any]] = {}
        for body in self.writes.get((ns, checkpoint_id), []):
            for w in body["w"]:
                key = (str(body["task"]), int(w["i"]))
                if key[1] >= 0 and key in chosen:
                    continue  # a regular write is stored once: the first one wins
                chosen[key] = (str(body["path"]), w)
        ordered = sorted(chosen.items(), key=lambda kv: writes_sort_key(kv[1][0], *kv[0]))
        return [
            (task, str(w["c"]), self.serde.loads_typed(unpack(w))) for (task, _), (_, w) in ordered
        ]

    def config(self, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def metadata(self, node: str) -> CheckpointMetadata:
        return cast(
            CheckpointMetadata, self.serde.loads_typed(unpack(self.nodes[node]["metadata"]))
        )

    def tuple(self, node: str) -> CheckpointTuple:
        """The CheckpointTuple of checkpoint node ``node``."""
        body = self.nodes[node]
        ns, cid, parent = str(body["ns"]), str(body["id"]), body["parent"]
        checkpoint = cast(Checkpoint, self.serde.loads_typed(unpack(body["checkpoint"])))
        checkpoint["channel_values"] = {c: fresh(self.value(node, c)) for c in body["values"]}
        return CheckpointTuple(
            config=self.config(ns, cid),
            checkpoint=checkpoint,
            metadata=self.metadata(node),
            parent_config=self.config(ns, str(parent)) if parent else None,
            pending_writes=self.pending(ns, cid),
        )

    def delta_history(
        self, ns: str, checkpoint_id: str | None, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """``get_delta_channel_history``: writes and seed along the parent chain.

        Hidden (pruned, forgotten) ancestors are walked too: they are still stored.
        """
        found: dict[str, list[PendingWrite]] = {c: [] for c in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        target = self.find(ns, checkpoint_id)
        cursor = self.nodes[target]["parent"] if target else None
        while cursor is not None and remaining:
            node = self.first.get((ns, str(cursor)))
            if node is None:
                break
            for write in reversed(self.pending(ns, str(cursor))):
                if write[1] in remaining:
                    found[write[1]].append(write)
            for channel in sorted(remaining & set(self.nodes[node]["values"])):
                seeds[channel] = fresh(self.value(node, channel))
                remaining.discard(channel)
            cursor = self.nodes[node]["parent"]
        result: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": found[channel][::-1]}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            result[channel] = entry
        return result
