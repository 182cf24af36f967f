"""The four backends agree exactly: seeded random operation sequences (appends and
their retries, compare-and-set, pop, trim, clear, snapshots, rollbacks, forks, delete,
compaction, TTL expiry) run on every backend in tests/support/backends.py, and every
result (messages, versions, snapshots, events, errors) is compared across them.

Time is a clock the test moves (TTL ticks without sleeping): every backend takes the
time of each operation from the client, so the clock is the facade's. A failure
names the seed and the step; rerun one seed with ``-k "seed-N"``.
"""

from __future__ import annotations

import random
import types
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import Message, ToolCall
from memvault.errors import MemvaultError
from tests.support.backends import BACKENDS

TTL = 100.0
STEPS = 150
SEEDS = range(4)

SESSIONS = [
    "a",
    "'; DROP TABLE sessions; --",
    "{tag}:x",
    "nul\x00id",
    "emoji 🙂",
    "slash/and\\back",
    "s" * 512,
]
WEIGHTS = [8, 5, 4, 1, 1, 1, 1]  # most operations meet on a few sessions
NAMES = ["cp", "two", "auto:pre-rollback@v2", "名前", "x" * 256]
TEXTS = ["hi", "", "\x00", "\u202eRTL", "🙂𝄞", "quote \" and '", "line\nbreak", "é" * 50]


class Clock:
    """The facade's time: it moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def time(self) -> float:
        return self.now


class Script:
    """The operations of one seed, drawn before any backend runs them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.count = 0
        self.sent: dict[str, list[list[Message]]] = {}
        self.names: dict[str, list[str]] = {}  # snapshot names asked for, per session

    def message(self) -> Message:
        rng = self.rng
        self.count += 1
        fields: dict[str, Any] = {
            "id": f"m{self.seed}-{self.count}",
            "created_at": datetime(2026, 1, 1, tzinfo=timezone.utc)
            + timedelta(seconds=self.count, microseconds=rng.randrange(10**6)),
        }
        kind = rng.randrange(6)
        if kind == 0:
            return Message.assistant(
                tool_calls=[ToolCall(id="c1", name="f", arguments='{"x": 1}')], **fields
            )
        if kind == 1:
            return Message.tool(rng.choice(TEXTS), tool_call_id="c1", **fields)
        if kind == 2:
            return Message.user(
                [{"type": "text", "text": rng.choice(TEXTS)}],
                metadata={"n": rng.random(), "k": [1, None, True]},
                **fields,
            )
        return Message(
            role=rng.choice(["user", "assistant", "system"]), content=rng.choice(TEXTS), **fields
        )

    def batch(self, sid: str) -> list[Message]:
        roll, sent = self.rng.random(), self.sent.setdefault(sid, [])
        if sent and roll < 0.1:
            return self.rng.choice(sent)  # an idempotent retry
        if sent and roll < 0.15:  # a batch mixing stored and new ids
            return [self.rng.choice(sent)[0], self.message()]
        batch = [self.message() for _ in range(self.rng.randint(1, 3))]
        sent.append(batch)
        return batch

    def name(self, sid: str, *, new: bool) -> str:
        """A snapshot name: mostly a new one to take, or one taken already (or an
        auto-saved one) to roll back or fork at."""
        taken = self.names.setdefault(sid, [])
        if not new:
            if taken and self.rng.random() < 0.85:
                return self.rng.choice(taken[-3:])
            return f"auto:pre-rollback@v{self.rng.randrange(1, 6)}"
        name = f"{self.rng.choice(NAMES)}{self.rng.randrange(3)}"[:256]
        taken.append(name)
        return name

    def step(self) -> tuple[str, Callable[[Any, Clock], Any]]:
        """One operation: its description and how to run it on a store."""
        rng = self.rng
        sid = rng.choices(SESSIONS, weights=WEIGHTS)[0]
        op = rng.choices(
            [
                "append",
                "append_cas",
                "history",
                "info",
                "pop",
                "trim",
                "clear",
                "snapshot",
                "snapshots",
                "rollback",
                "fork",
                "log",
                "delete",
                "sessions",
                "compact",
                "tick",
            ],
            weights=[14, 4, 6, 3, 4, 2, 1, 3, 2, 3, 2, 2, 1, 1, 1, 3],
        )[0]
        if op == "append":
            batch = self.batch(sid)
            return f"append {sid!r} {[m.id for m in batch]}", lambda st, _: st.session(sid).append(
                batch
            )
        if op == "append_cas":
            batch, expect = self.batch(sid), rng.randrange(4)
            return (
                f"append {sid!r} {[m.id for m in batch]} expect_version={expect}",
                lambda st, _: st.session(sid).append(batch, expect_version=expect),
            )
        if op == "history":
            last = rng.choice([None, 0, 1, 2, 5])
            return f"history {sid!r} last={last}", lambda st, _: st.session(sid).history(last)
        if op == "trim":
            keep = rng.randrange(4)
            return f"trim {sid!r} {keep}", lambda st, _: st.session(sid).trim(keep)
        if op in ("snapshot", "rollback"):
            name = self.name(sid, new=op == "snapshot")
            return f"{op} {sid!r} {name!r}", lambda st, _: getattr(st.session(sid), op)(name)
        if op == "fork":
            new = rng.choice([*SESSIONS, "fork-1", "fork-2", "fork-3"])
            at = rng.choice([None, self.name(sid, new=False)])
            return (
                f"fork {sid!r} -> {new!r} at={at!r}",
                lambda st, _: st.session(sid).fork(new, at=at).history(),
            )
        if op == "sessions":
            return "sessions", lambda st, _: st.sessions()
        if op == "compact":
            keep = rng.choice([None, 0, 1, 3])
            return f"compact keep_events={keep}", lambda st, _: st.compact(keep)
        if op == "tick":
            seconds = rng.choices([1.0, 30.0, TTL + 1], weights=[3, 2, 1])[0]

            def tick(_: Any, clock: Clock) -> None:
                clock.now += seconds

            return f"tick {seconds}", tick
        return f"{op} {sid!r}", lambda st, _: getattr(st.session(sid), op)()


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except MemvaultError as exc:
        return ("raised", type(exc).__name__)


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_backends_agree_exactly(
    seed: int, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clocks: dict[str, Clock] = {}
    stores: dict[str, memvault.Store] = {}
    try:
        for name, url_for in sorted(BACKENDS.items()):
            clocks[name] = Clock()
            # each store reads its own clock: the facade's time module, per store
            monkeypatch.setattr(
                "memvault.store.time", types.SimpleNamespace(time=clocks[name].time)
            )
            stores[name] = memvault.open(url_for(request, tmp_path), ttl=TTL, writer="diff")
        script = Script(seed)
        trace: list[str] = []
        for step in range(STEPS):
            what, run = script.step()
            trace.append(what)
            results = {}
            for name, store in stores.items():
                monkeypatch.setattr(
                    "memvault.store.time", types.SimpleNamespace(time=clocks[name].time)
                )
                results[name] = _outcome(lambda: run(store, clocks[name]))  # noqa: B023
                if step % 10 == 9 or step == STEPS - 1:
                    results[name] = (results[name], _state(store))
            reference = results["memory"]
            for name, got in results.items():
                assert got == reference, (
                    f"seed {seed}, step {step} ({what}): {name} gave {got!r}, memory "
                    f"{reference!r}\nsteps so far:\n" + "\n".join(trace)
                )
    finally:
        for store in stores.values():
            store.close()


def _state(store: memvault.Store) -> Any:
    """Everything a reader can see of every session."""
    return {
        sid: (s.info(), s.history(), s.snapshots(), s.log())
        for sid in store.sessions()
        for s in [store.session(sid)]
    }
