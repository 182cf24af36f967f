"""A LangGraph thread's storage grows linearly on memvault, not quadratically.

300 turns of a MessagesState graph on SQLite: the store's bytes (compacted with
VACUUM INTO, so free pages do not count) at 300 turns are at most 2.2 times those
at 150 turns, and at most a tenth of what LangGraph's SqliteSaver stores for the
same run (it stores the whole ``messages`` list again at each step). And a node's
id, which makes a retried write a no-op, hashes its body as it always did.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from memvault.integrations._langgraph_log import _digest
from memvault.integrations.langgraph import MemvaultSaver
from tests.support.langgraph_graphs import echo_graph

TURNS = 300


def compacted_size(db: Path, tmp_path: Path) -> int:
    out = tmp_path / f"vacuumed-{db.name}"
    out.unlink(missing_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM INTO ?", (str(out),))
    conn.close()
    return out.stat().st_size


def run(saver: Any, size: Callable[[], int]) -> dict[int, int]:
    graph = echo_graph(saver)
    cfg: Any = {"configurable": {"thread_id": "long"}}
    sizes = {}
    for n in range(1, TURNS + 1):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: " + "words " * 30)]}, cfg)
        if n in (TURNS // 2, TURNS):
            sizes[n] = size()
    assert len(graph.get_state(cfg).values["messages"]) == 2 * TURNS
    return sizes


@pytest.mark.slow
def test_300_turns_grow_linearly_and_take_a_tenth_of_sqlite_saver(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "memvault.db", tmp_path / "langgraph.db"
    with MemvaultSaver.from_conn_string(f"sqlite:///{ours}") as saver:
        mine = run(saver, lambda: compacted_size(ours, tmp_path))
    with SqliteSaver.from_conn_string(str(theirs)) as saver:
        other = run(saver, lambda: compacted_size(theirs, tmp_path))
    assert mine[TURNS] / mine[TURNS // 2] <= 2.2, mine
    assert other[TURNS] / other[TURNS // 2] > 3, other  # quadratic: what this is about
    assert mine[TURNS] * 10 <= other[TURNS], (mine, other)


def test_a_node_id_hashes_its_body_as_it_always_did() -> None:
    # Node ids make retries idempotent across versions of memvault: the same body
    # must give the same id (sha256 of json.dumps([body], sort_keys=True), 48 hex).
    body = {
        "kind": "checkpoint",
        "ns": 'sub:é "q"',
        "id": "1f0c-01",
        "parent": None,
        "run": "run-1",
        "checkpoint": {"t": "msgpack", "b": "QUJD"},
        "metadata": {"t": "msgpack", "b": "REVG"},
        "values": {
            "messages": {"ext": "lg-c-0", "n": 2, "t": "msgpack", "b": "R0hJ"},
            "count": {"at": "lg-c-0"},
            "blob": {"t": "bytes", "b": ""},
        },
    }
    assert _digest(body) == "fa0263264f43585e9b95a4338d415bb6b25144ce40b13bc9"
