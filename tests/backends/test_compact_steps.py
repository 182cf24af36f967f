"""compact's steps where a step's size is bounded by nodes (memory, SQLite and
PostgreSQL: ``COMPACT_STEP_NODES``; Redis runs one script per session, and its steps
only pace the progress reports)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memvault
from memvault.messages import Message
from memvault.model import COMPACT_STEP_NODES
from tests.support.postgres import new_schema, url_for


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return url_for(new_schema(request))
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/s.db"


def test_a_step_ends_once_its_sessions_held_the_node_budget(url: str) -> None:
    """A step takes sessions until those it took held COMPACT_STEP_NODES nodes or
    more, one session at least: sessions of budget - 1, 1, budget and 1 nodes are
    compacted in steps of 2, 1 and 1. Failing: PostgreSQL's compact_step counted
    its budget or its stop condition otherwise (mutants of each survived the suite).
    """
    sizes = {"a": COMPACT_STEP_NODES - 1, "b": 1, "c": COMPACT_STEP_NODES, "d": 1}
    with memvault.open(url) as store:
        for name, size in sizes.items():
            for start in range(0, size, 1000):
                store.session(name).append(
                    [Message.user("x") for _ in range(min(1000, size - start))]
                )
        seen: list[int] = []
        store.compact(batch=100, progress=lambda p: seen.append(p.done))
        assert seen == [2, 3, 4]
