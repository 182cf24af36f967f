"""Regenerate the seeded-store baselines: ``python -m tests.data.make_baseline``.

Writes baseline.sqlite (a SQLite store after a realistic agent run: turns, tool
calls, snapshots, a rollback, a fork, a trim) and baseline.jsonl (its export).
``python -m tests.data.make_baseline NAME.sqlite`` writes the same run to another
file only (the run, then :func:`searched`), in the schema of the memvault that runs
it: baseline-schema4.sqlite, baseline-schema5.sqlite and baseline-schema6.sqlite were
written so by schemas 4, 5 and 6.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import memvault
from memvault import Message, ToolCall
from memvault.cli.transfer import export_sessions

HERE = Path(__file__).parent
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


def run(store: memvault.Store) -> None:
    s = store.session("user-42")
    s.append(
        [
            Message.system("You are a travel agent.", id="sys", created_at=T0),
            Message.user("My name is Wang; book me a train to Lyon.", id="u1", created_at=T0),
        ]
    )
    s.append(
        [
            Message.assistant(
                None,
                id="a1",
                created_at=T0,
                tool_calls=[
                    ToolCall(id="call-1", name="search_trains", arguments='{"to": "Lyon"}')
                ],
            ),
            Message.tool(
                '{"trains": ["08:12", "10:40"]}', id="t1", tool_call_id="call-1", created_at=T0
            ),
        ]
    )
    s.snapshot("before-booking")
    s.append(
        [
            Message.assistant("Booked the 08:12.", id="a2", created_at=T0),
            Message.tool("ERROR 500 \x00 garbage", id="t2", tool_call_id="call-2", created_at=T0),
        ]
    )
    s.rollback("before-booking")
    s.append(
        [
            Message.assistant(
                "Which train do you prefer, Wang?",
                id="a3",
                created_at=T0,
                metadata={"model": "m-1", "usage": {"in": 41, "out": 9}},
            )
        ]
    )
    s.snapshot("asked")
    s.fork("user-42-retry", at="before-booking")
    other = store.session("support ticket #7 — café ☕")
    other.append([Message.user(f"line {i}", id=f"l{i}", created_at=T0) for i in range(12)])
    other.snapshot("full")
    other.trim(keep_last=4)


def searched(store: memvault.Store) -> None:
    """After :func:`run`: a search indexes what is stored so far, then one more turn
    is stored (on SQLite, only noted for the index: in search_pending up to schema 5,
    by its session's pending from schema 6)."""
    store.search("Lyon")
    store.session("support ticket #7 — café ☕").append(
        [Message.user("line after the search", id="l12", created_at=T0)]
    )


def main(name: str = "baseline.sqlite") -> None:
    db = HERE / name
    for stale in (db, HERE / f"{name}-wal", HERE / f"{name}-shm"):
        stale.unlink(missing_ok=True)
    with memvault.open(f"sqlite:///{db}", writer="baseline") as store:
        run(store)
        if name == "baseline.sqlite":
            (HERE / "baseline.jsonl").write_text(
                "".join(line + "\n" for line in export_sessions(store)), encoding="utf-8"
            )
        else:
            searched(store)
    import sqlite3

    with sqlite3.connect(db) as conn:  # fold the WAL in, so the baseline is one file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for leftover in (HERE / f"{name}-wal", HERE / f"{name}-shm"):
        leftover.unlink(missing_ok=True)


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:2])
