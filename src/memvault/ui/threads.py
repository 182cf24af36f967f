"""LangGraph threads in the inspector: a thread's checkpoints as a tree.

A thread saved by :class:`memvault.integrations.langgraph.MemvaultSaver` is the
session ``langgraph:<thread_id>``. Its checkpoints are read through the saver's
public ``list()`` (so hidden ones, pruned or deleted for a run, are left out, as
LangGraph sees them) and arranged by ``parent_checkpoint_id``: time travel and
``update_state`` on an older checkpoint show as branches. Needs the ``langgraph``
extra; without it the page says which extra to install.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import memvault

PREFIX = "langgraph:"
"""The session id prefix of LangGraph threads (as in the integration)."""


@dataclass
class Checkpoint:
    """One checkpoint of a thread and the checkpoints made from it."""

    id: str
    ns: str
    step: Any
    source: str
    ts: str
    messages: int | None
    children: list[Checkpoint] = field(default_factory=list)


def is_thread(session_id: str) -> bool:
    return session_id.startswith(PREFIX)


def checkpoint_tree(store: memvault.Store, session_id: str) -> list[Checkpoint]:
    """The roots of the thread's checkpoint tree, oldest first, children oldest first.

    Raises:
        ConfigurationError: the ``langgraph`` extra is not installed.
    """
    from memvault.integrations.langgraph import MemvaultSaver

    saver = MemvaultSaver(store=store)
    found = list(saver.list({"configurable": {"thread_id": session_id[len(PREFIX) :]}}))
    nodes: dict[tuple[str, str], Checkpoint] = {}
    parents: dict[tuple[str, str], tuple[str, str] | None] = {}
    for t in found:
        conf = t.config["configurable"]
        key = (str(conf.get("checkpoint_ns", "")), str(conf["checkpoint_id"]))
        values = t.checkpoint.get("channel_values", {})
        messages = values.get("messages")
        nodes[key] = Checkpoint(
            key[1],
            key[0],
            t.metadata.get("step"),
            str(t.metadata.get("source", "")),
            str(t.checkpoint.get("ts")),
            len(messages) if isinstance(messages, list) else None,
        )
        parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        parents[key] = None if parent is None else (key[0], str(parent))
    roots: list[Checkpoint] = []
    for key in sorted(nodes):
        parent = parents[key]
        (nodes[parent].children if parent in nodes else roots).append(nodes[key])
    return roots
