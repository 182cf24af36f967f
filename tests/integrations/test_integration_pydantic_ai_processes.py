"""Two processes continuing one pydantic-ai conversation lose nothing.

Both load the conversation, wait until the other has loaded it too, run the agent
and save their run. With ``expect_version`` one save wins and the other raises
ConflictError, writing nothing; without it both turns are kept, each contiguous. A
summary written while the other process saves a turn keeps that turn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic_ai.messages import CompactionPart, ModelMessagesTypeAdapter, ModelRequest

from memvault.integrations.pydantic_ai import MemvaultHistory
from tests.support.backends import BACKENDS
from tests.support.pydantic_ai_agents import make_agent, stored_models

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import json, sys, time
from pathlib import Path
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessagesTypeAdapter
from memvault import ConflictError
from memvault.integrations.pydantic_ai import MemvaultHistory, MemvaultSummarizer
from tests.support.pydantic_ai_agents import make_agent, stored_models

url, name, mode, folder = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])

def wait_for(flag):
    deadline = time.monotonic() + 120
    while not (folder / flag).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no {flag}")
        time.sleep(0.01)

def signal(flag):
    (folder / flag).write_text(name)

with MemvaultHistory.from_conn_string(url, "shared", writer=name) as history:
    capabilities = []
    if mode == "summarize":
        def summarize(messages):
            signal("summarizing")
            wait_for("appended")  # the other process saves its turn meanwhile
            return f"summary by {name} of {len(messages)}"
        summarizer = MemvaultSummarizer(history, summarize, max_messages=6, keep_last=2)
        capabilities = [ProcessHistory(summarizer)]
    agent = make_agent(capabilities)
    if mode == "append-during-summary":
        wait_for("summarizing")
    version = history.version
    loaded = history.load()
    if mode in ("cas", "plain"):
        signal(f"loaded-{name}")
        wait_for("go")
    result = agent.run_sync(f"turn of {name}", message_history=loaded)
    outcome = "ok"
    try:
        history.extend(result.new_messages(), expect_version=version if mode == "cas" else None)
    except ConflictError:
        outcome = "conflict"
    if mode == "append-during-summary":
        signal("appended")
    (folder / f"{name}.json").write_text(json.dumps({
        "outcome": outcome,
        "new": json.loads(ModelMessagesTypeAdapter.dump_json(result.new_messages())),
    }))
"""


def start(url: str, name: str, mode: str, folder: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WORKER, url, name, mode, str(folder)], cwd=ROOT)


def outcome(folder: Path, name: str) -> tuple[str, list[object]]:
    data = json.loads((folder / f"{name}.json").read_text())
    return data["outcome"], ModelMessagesTypeAdapter.validate_python(data["new"])


def seeded(url: str) -> list[object]:
    """The conversation both processes continue: one turn, saved."""
    with MemvaultHistory.from_conn_string(url, "shared") as history:
        history.extend(make_agent().run_sync("the first turn").new_messages())
        return list(history.load())


def run_both(url: str, mode: str, folder: Path) -> None:
    workers = [start(url, name, mode, folder) for name in ("alpha", "beta")]
    deadline = time.monotonic() + 120
    while not all((folder / f"loaded-{n}").exists() for n in ("alpha", "beta")):
        assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
        time.sleep(0.01)
    (folder / "go").write_text("go")
    assert [w.wait(timeout=240) for w in workers] == [0, 0]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])  # memory:// is per process
def test_with_expect_version_one_save_wins_and_the_other_conflicts(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = BACKENDS[backend](request, tmp_path)
    first = seeded(url)
    run_both(url, "cas", tmp_path)
    results = {name: outcome(tmp_path, name) for name in ("alpha", "beta")}
    assert sorted(o for o, _ in results.values()) == ["conflict", "ok"]
    (winner_new,) = [new for o, new in results.values() if o == "ok"]
    with MemvaultHistory.from_conn_string(url, "shared") as history:
        assert history.load() == first + winner_new  # the loser wrote nothing
        assert history.version == 2


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_without_expect_version_both_turns_are_kept_each_contiguous(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = BACKENDS[backend](request, tmp_path)
    first = seeded(url)
    run_both(url, "plain", tmp_path)
    alpha, beta = (outcome(tmp_path, name)[1] for name in ("alpha", "beta"))
    with MemvaultHistory.from_conn_string(url, "shared") as history:
        loaded = history.load()
    assert loaded[: len(first)] == first
    assert loaded[len(first) :] in (alpha + beta, beta + alpha)
    assert len(alpha) == len(beta) == 6


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_a_summary_written_while_another_process_saves_loses_nothing(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = BACKENDS[backend](request, tmp_path)
    first = seeded(url)
    summarizer = start(url, "alpha", "summarize", tmp_path)
    appender = start(url, "beta", "append-during-summary", tmp_path)
    assert [w.wait(timeout=240) for w in (summarizer, appender)] == [0, 0]
    alpha, beta = (outcome(tmp_path, name)[1] for name in ("alpha", "beta"))
    with MemvaultHistory.from_conn_string(url, "shared") as history:
        loaded = history.load()
        full = stored_models(history.session.history(full=True))
        info = history.session.info()
    summary = [
        m for m in full if isinstance(m, ModelRequest) and isinstance(m.parts[0], CompactionPart)
    ]
    assert len(summary) == 1 and info is not None and info.summarized > 0
    assert [m for m in full if m not in summary] == first + beta + alpha  # every original
    assert loaded[0] == summary[0]
    assert loaded[-len(beta) - len(alpha) :] == beta + alpha  # beta's turn, saved meanwhile
