"""LangGraph threads in the inspector: the checkpoint tree, on every backend."""

from __future__ import annotations

import re
from urllib.parse import quote

from langchain_core.messages import HumanMessage
from starlette.testclient import TestClient

import memvault
from memvault.integrations.langgraph import MemvaultSaver
from memvault.ui import create_app
from memvault.ui.threads import checkpoint_tree
from tests.support.langgraph_graphs import echo_graph


def test_a_thread_shows_its_checkpoints_as_a_tree(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        graph = echo_graph(MemvaultSaver(store=store))
        cfg = {"configurable": {"thread_id": "t-1"}}
        graph.invoke({"messages": [HumanMessage("one")]}, cfg)
        first = graph.get_state(cfg)
        graph.invoke({"messages": [HumanMessage("two")]}, cfg)
        # Time travel: an update from the end of the first turn starts a branch.
        graph.update_state(first.config, {"messages": [HumanMessage("three")]})
        history = list(graph.get_state_history(cfg))
        c = TestClient(create_app(store))
        sid = quote("langgraph:t-1", safe="")
        assert 'id="checkpoints"' in c.get(f"/session?id={sid}").text
        html = c.get(f"/checkpoints?id={sid}").text
        assert html.count('class="checkpoint"') == len(history)
        assert all(s.config["configurable"]["checkpoint_id"] in html for s in history)
        # The first turn's last checkpoint has two children: the second turn and the update.
        branch = first.config["configurable"]["checkpoint_id"]
        roots = checkpoint_tree(store, "langgraph:t-1")
        assert len(roots) == 1
        node, path = roots[0], []
        while node.id != branch:
            assert len(node.children) == 1  # one line of descent up to the branch point
            path.append(node.id)
            node = node.children[0]
        assert len(node.children) == 2
        assert html.index(path[0]) < html.index(branch) < html.index(node.children[1].id)
        assert len(re.findall(r'<ul class="tree">', html)) == len(history) - 1  # one per parent
        assert c.get("/checkpoints?id=agent").status_code == 404
