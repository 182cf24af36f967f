"""The PostgreSQL functions against the reference engine, operation by operation.

Seeded random sequences of every protocol operation run on the memory backend
(the engine) and on PostgreSQL with identical arguments and clock (``Write.now``
is given, so expiry happens without sleeping). Every result and every error
(type and message) must be identical.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from memvault.backends.base import Write
from memvault.backends.memory import MemoryBackend
from memvault.backends.postgres.backend import PostgresBackend, open_backend
from memvault.messages import Message, Record, encode_message
from memvault.model import AUTO_PREFIX
from tests.support.postgres import new_schema, url_for

SESSIONS = ["a", "b\x00'\"", "é👍", "fork-1", "fork-2"]  # forks go to the last two
NAMES = ["cp", "x\x00y", "z"]


class Driver:
    """Picks random operations; the same seed gives the same sequence."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.now = 1_700_000_000.0
        self.sent: list[list[Record]] = []
        self.count = 0

    def write(self) -> Write:
        self.now += self.rnd.choice([0.0, 0.5, 1.0, 3.0])
        ttl = self.rnd.choice([None, None, 4.0])
        return Write(self.rnd.choice(["w1", "w\x002"]), self.now, ttl)

    def records(self) -> list[Record]:
        roll = self.rnd.random()
        if self.sent and roll < 0.15:
            return self.rnd.choice(self.sent)  # a retry: all ids stored (or not, if expired)
        fresh = []
        for _ in range(self.rnd.randint(1, 3)):
            self.count += 1
            fresh.append(
                encode_message(
                    Message.user(f"m{self.count} \x00", id=f"id{self.count}\x00"), 1 << 20
                )
            )
        if self.sent and roll < 0.35:
            fresh.append(self.rnd.choice(self.sent[-1]))  # mixed: refused if that was stored
        self.sent.append(fresh)
        return fresh

    def snapshot_name(self, backend: Any, sid: str) -> str:
        autos = [s.name for s in backend.snapshots(sid, self.now) if s.name.startswith(AUTO_PREFIX)]
        return self.rnd.choice(NAMES + autos[-1:])

    def step(self) -> tuple[str, tuple[Any, ...]]:
        """One operation and its arguments (the reference decides auto names)."""
        r, sid = self.rnd, self.rnd.choice(SESSIONS[:3])
        op = r.choices(
            [
                "append",
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
            ],
            weights=[30, 8, 4, 6, 4, 2, 6, 3, 6, 6, 3, 3, 2, 2],
        )[0]
        if op == "append":
            expect = r.choice([None, None, None, r.randint(0, 8)])
            known = [rec.id for batch in self.sent[-3:] for rec in batch]
            after = r.choice([None, None, None, "never stored", *known[-2:]])
            return op, (sid, self.records(), expect, after, self.write())
        if op in ("history",):
            return op, (sid, r.choice([None, 0, 1, 3, 50]), self.now)
        if op in ("info", "snapshots", "log"):
            return op, (sid, self.now)
        if op == "pop":
            return op, (sid, self.write())
        if op in ("trim", "clear"):
            return "trim", (sid, 0 if op == "clear" else r.randint(0, 5), op, self.write())
        if op == "snapshot":
            return op, (sid, r.choice(NAMES), self.write())
        if op == "rollback":
            return op, (sid, "<pick>", self.write())
        if op == "fork":
            return op, (sid, r.choice(SESSIONS[2:]), r.choice([None, *NAMES]), self.write())
        if op == "delete":
            return op, (r.choice(SESSIONS), self.now)
        if op == "sessions":
            return op, (self.now,)
        return op, (r.choice([None, 0, 2]), self.now)


def _outcome(backend: Any, op: str, args: tuple[Any, ...]) -> Any:
    try:
        return getattr(backend, op)(*args)
    except Exception as exc:
        return (type(exc), str(exc))


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> Any:
    backend = open_backend(url_for(new_schema(request)))
    yield backend
    backend.close()


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_the_engine(postgres: PostgresBackend, seed: int) -> None:
    reference = MemoryBackend()
    driver = Driver(seed)
    for i in range(250):
        op, args = driver.step()
        if op == "rollback":
            args = (args[0], driver.snapshot_name(reference, args[0]), args[2])
        expected = _outcome(reference, op, args)
        assert _outcome(postgres, op, args) == expected, f"step {i}: {op}{args!r}"
        for sid in SESSIONS:  # the whole visible state agrees after every step
            reads = [("history", (sid, None, driver.now))] + [
                (f, (sid, driver.now)) for f in ("info", "snapshots", "log")
            ]
            assert [_outcome(postgres, f, a) for f, a in reads] == [
                _outcome(reference, f, a) for f, a in reads
            ], f"after step {i}: {op}"
