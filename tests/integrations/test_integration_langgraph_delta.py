"""LangGraph's DeltaChannel on MemvaultSaver: replayed through get_delta_channel_history.

A DeltaChannel stores only a sentinel in most checkpoints and rebuilds its value
from the writes along the parent chain, back to a snapshot. The graph must see the
same values as on LangGraph's InMemorySaver, and still after ``prune`` (memvault
hides pruned checkpoints but keeps them, so the chain stays readable).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from memvault.integrations.langgraph import MemvaultSaver


def extend(state: list[str], writes: list[list[str]]) -> list[str]:
    return [*state, *(item for write in writes for item in write)]


class State(TypedDict):
    items: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]
    turns: Annotated[int, operator.add]


def graph(saver: Any) -> Any:
    def add(state: State) -> dict[str, Any]:
        return {"items": [f"item {state['turns']}"], "turns": 1}

    builder = StateGraph(State)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder.compile(checkpointer=saver)


def run(saver: Any) -> list[Any]:
    g, cfg = graph(saver), {"configurable": {"thread_id": "delta"}}
    seen = []
    for _ in range(8):
        g.invoke({"items": [], "turns": 0}, cfg)
        seen.append(g.get_state(cfg).values)
    latest = saver.get_tuple(cfg)
    history = saver.get_delta_channel_history(config=latest.config, channels=["items"])
    seen.append((history["items"].get("seed"), [w[1:] for w in history["items"]["writes"]]))
    return seen


def test_delta_channel_reads_as_on_in_memory_saver_and_survives_prune(any_store_url: str) -> None:
    oracle = run(InMemorySaver())
    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        assert run(saver) == oracle
        saver.prune(["delta"])
        cfg = {"configurable": {"thread_id": "delta"}}
        assert len(list(saver.list(cfg))) == 1
        assert graph(saver).get_state(cfg).values == oracle[7]
    assert oracle[7]["items"] == [f"item {n}" for n in range(8)]
