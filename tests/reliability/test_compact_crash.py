"""compact killed with SIGKILL at chosen and random points, on every shared backend.

A real process runs ``compact`` in small steps and is killed between two steps or
somewhere inside one. Afterwards every session reads exactly as before (history,
snapshots and what each snapshot holds), expired sessions stay invisible, and the
next ``compact`` finishes the job: a third one finds nothing left to remove.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from memvault import Message
from memvault.testing.state import State, diff_states, dump_state
from tests.support.backends import BACKENDS

pytestmark = pytest.mark.slow

SESSIONS, EXPIRED, BATCH = 40, 10, 4

# Runs compact in steps of BATCH; after each step it says so on stdout and waits for
# a line on stdin before going on, so the test decides where it is killed.
CHILD = """
import sys, memvault
with memvault.open(sys.argv[1]) as store:
    def step(p):
        print(p.done, p.total, flush=True)
        sys.stdin.readline()
    store.compact(keep_events=0, batch=int(sys.argv[2]), progress=step)
print("finished", flush=True)
"""


def texts(messages: list[Message]) -> list[str]:
    return [str(m.content) for m in messages]


def fill(url: str) -> None:
    """Live sessions, each with garbage once its events go (popped turns) and a
    snapshot holding turns the head no longer reaches; and sessions that expired."""
    with memvault.open(url) as store:
        for i in range(SESSIONS):
            s = store.session(f"live {i}")
            s.append([message(f"{i} m{k}") for k in range(4)])
            s.snapshot("cp")
            s.pop()
            s.pop()
            s.append([message(f"{i} n0"), message(f"{i} n1")])
            s.pop()
    with memvault.open(url, ttl=0.5) as store:
        for i in range(EXPIRED):
            store.session(f"gone {i}").append([Message.user("bye"), Message.user("now")])
    time.sleep(0.6)


def message(text: str) -> Message:
    return Message(id=text, role="user", content=text)


def readable(url: str) -> State:
    """What a user reads of every live session (dump_state), but the event log,
    which compact(keep_events=0) empties."""
    with memvault.open(url) as store:
        state = dump_state(store)
    for session in state["sessions"].values():
        session["log"] = []
    return state


def assert_whole(url: str, before: State) -> None:
    """Every live session reads as written; no expired one is visible."""
    assert diff_states(before, readable(url)) == []
    assert sorted(before["sessions"]) == sorted(f"live {i}" for i in range(SESSIONS))
    assert [m["id"] for m in before["sessions"]["live 3"]["history"]] == ["3 m0", "3 m1", "3 n0"]


def assert_snapshots_whole(url: str) -> None:
    """What each snapshot holds, read back through a fork of it (a write: done last)."""
    with memvault.open(url) as store:
        for i in range(SESSIONS):
            copy = store.session(f"live {i}").fork(f"copy {i}", at="cp")
            assert texts(copy.history()) == [f"{i} m{k}" for k in range(4)]


def run_and_kill(url: str, steps: int, delay: float | None) -> list[str]:
    """Start the compacting process; let it finish ``steps`` steps, then SIGKILL it:
    at once (between two steps) or ``delay`` seconds into the next step. Returns
    the progress lines it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, str(BATCH)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    lines = []
    try:
        for _ in range(steps):
            lines.append(child.stdout.readline().strip())
            if delay is not None or len(lines) < steps:
                child.stdin.write("go\n")
                child.stdin.flush()
        if delay is not None:
            time.sleep(delay)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
        child.stdin.close()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return lines


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_killed_compact_leaves_every_session_whole(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = BACKENDS[backend](request, tmp_path)
    fill(url)
    before = readable(url)
    rng = random.Random(f"compact-crash-{backend}")
    # killed between steps 1/2, 5/6, and at random moments inside later steps
    for steps, delay in [
        (1, None),
        (5, None),
        (rng.randint(2, 6), rng.uniform(0, 0.02)),
        (rng.randint(2, 6), rng.uniform(0, 0.02)),
    ]:
        lines = run_and_kill(url, steps, delay)
        done = [int(line.split()[0]) for line in lines]
        assert len({line.split()[1] for line in lines}) == 1  # one total per run
        assert done == sorted(done) and len(done) == steps
        assert_whole(url, before)
    with memvault.open(url) as store:
        rest = store.compact(keep_events=0)
        assert rest.nodes + rest.sessions > 0, "the kills left nothing for compact to finish"
        assert store.compact(keep_events=0) == memvault.CompactStats()
        for i in range(SESSIONS):
            assert store.session(f"live {i}").log() == []
    assert_whole(url, before)
    assert_snapshots_whole(url)
