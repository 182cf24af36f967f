"""Two processes resuming one LangGraph thread lose no checkpoint.

Each process runs turns of the same graph on the same thread at the same time;
every checkpoint either of them put must be listed afterwards, with the turn it
recorded. (Which branch is "latest" is LangGraph's business: two runs resuming
the same checkpoint fork the thread, as they do on LangGraph's own savers.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from memvault.integrations.langgraph import MemvaultSaver
from tests.support.backends import BACKENDS

WORKER = r"""
import json, sys
from langchain_core.messages import HumanMessage
from memvault.integrations.langgraph import MemvaultSaver
from tests.support.langgraph_graphs import echo_graph

url, name, turns, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
put = []

class Recording(MemvaultSaver):
    def put(self, config, checkpoint, metadata, new_versions):
        result = super().put(config, checkpoint, metadata, new_versions)
        put.append(checkpoint["id"])
        return result

with Recording.from_conn_string(url, writer=name) as saver:
    graph = echo_graph(saver)
    for n in range(turns):
        graph.invoke({"messages": [HumanMessage(f"{name} {n}")]},
                     {"configurable": {"thread_id": "shared"}})
with open(out, "w") as f:
    json.dump(put, f)
"""

TURNS = 12


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])  # memory:// is per process
def test_two_processes_resuming_one_thread_lose_no_checkpoint(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    any_store_url = BACKENDS[backend](request, tmp_path)
    root = Path(__file__).resolve().parents[2]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                any_store_url,
                name,
                str(TURNS),
                str(tmp_path / f"{name}.json"),
            ],
            cwd=root,
        )
        for name in ("alpha", "beta")
    ]
    assert [w.wait(timeout=240) for w in workers] == [0, 0]
    put = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("alpha", "beta")}
    cfg: Any = {"configurable": {"thread_id": "shared"}}
    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        listed = {t.checkpoint["id"]: t for t in saver.list(cfg)}
        assert saver.store is not None
        writers = {e.writer for e in saver.store.session("langgraph:shared").log()}
    assert set(listed) == set(put["alpha"]) | set(put["beta"])
    assert len(listed) == 2 * TURNS * 3  # input, after __start__, after echo: per turn
    for name in ("alpha", "beta"):
        said = {
            m.content
            for cid in put[name]
            for m in listed[cid].checkpoint["channel_values"].get("messages", [])
            if isinstance(m, HumanMessage) and m.content.startswith(name)
        }
        assert said == {f"{name} {n}" for n in range(TURNS)}
    assert writers == {"alpha", "beta"}
