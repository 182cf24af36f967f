"""memvault's SQLite backend side by side with raw sqlite3 and two peer libraries.

Run from the repository root (needs ``pip install -e ".[bench]"``)::

    python benchmarks/bench_sqlite.py --runs 3 --out /tmp/report.md

Every store gets its own database file under one temporary folder on local disk,
in WAL mode, at the same durability: ``synchronous=FULL`` (an fsync of the WAL on
every commit) unless the figure says "normal". The contenders:

- raw sqlite3: the minimal equivalent work. Append: one transaction inserting the
  two rows of a turn (JSON text) into a table indexed by (session, id). History:
  the newest 20 rows through that index, JSON-decoded, oldest first. Snapshot: one
  transaction inserting a named pointer (the newest row id). Rollback: one
  transaction saving the current pointer under a new name and moving it.
- memvault: ``memvault.open("sqlite:///...", durability=...)``, its public API.
- openai-agents ``SQLiteSession`` (async API, called through one event loop).
- langchain-community ``SQLChatMessageHistory`` on a SQLAlchemy engine set to WAL
  and synchronous=FULL (its default is the rollback journal). It has no way to read
  only the last N messages: its history figure reads them all.

The peers have no snapshot or rollback. Message objects are built before the timed
calls (a user holds them already); encoding them is part of each timed call.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    BIG,
    MEMVAULT,
    SIZES,
    SMALL,
    Pairs,
    arguments,
    at_most,
    filling,
    flat_with_size,
    lc_messages,
    lc_turn,
    machine,
    mv_messages,
    mv_turn,
    pointer_targets,
    prebuilt,
    progress,
    report,
    run,
    shared_benches,
    turn_pairs,
    verdict,
)
from harness import Candidate, Comparison, compare, on_loop

import memvault

RAW = "raw sqlite3"
AGENTS = "openai-agents SQLiteSession"
LANGCHAIN = "langchain SQLChatMessageHistory"


def wal_pages(path: Path) -> int:
    """Frames in the WAL file (4 KiB pages): it stops growing once checkpointed."""
    wal = Path(f"{path}-wal")
    return (wal.stat().st_size - 32) // (4096 + 24) if wal.exists() else 0


def warm_wal(path: Path, write: Callable[[int], object]) -> int:
    """Write until the WAL has passed its first automatic checkpoint (1000 frames).

    Returns how many writes it took; the WAL is then reused from its start.
    """
    count = 0
    while wal_pages(path) < 1000:
        write(-1 - count)
        count += 1
    for _ in range(50):
        write(-1 - count)
        count += 1
    return count


class Raw:
    """Plain sqlite3, the least work that stores and reads a conversation."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute(f"PRAGMA synchronous = {synchronous}")
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, session TEXT NOT NULL,
                                                 body TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS messages_session ON messages (session, id);
            CREATE TABLE IF NOT EXISTS snapshots (session TEXT NOT NULL, name TEXT NOT NULL,
                head INTEGER NOT NULL, PRIMARY KEY (session, name));
            CREATE TABLE IF NOT EXISTS heads (session TEXT PRIMARY KEY, head INTEGER NOT NULL);
        """)

    def append(self, session: str, pairs: Pairs) -> None:
        rows = [
            (session, json.dumps({"role": role, "content": text}, ensure_ascii=False))
            for role, text in pairs
        ]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO messages (session, body) VALUES (?, ?)", rows)
        self.db.execute("COMMIT")

    def history(self, session: str, last: int) -> list[dict[str, str]]:
        rows = self.db.execute(
            "SELECT body FROM messages WHERE session = ? ORDER BY id DESC LIMIT ?", (session, last)
        ).fetchall()
        return [json.loads(r[0]) for r in reversed(rows)]

    def set_head(self, session: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO heads SELECT ?, max(id) FROM messages WHERE session = ?",
            (session, session),
        )

    def snapshot(self, session: str, name: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO snapshots SELECT session, ?, head FROM heads WHERE session = ?",
            (name, session),
        )
        self.db.execute("COMMIT")

    def rollback(self, session: str, name: str, saved_as: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO snapshots SELECT session, ?, head FROM heads WHERE session = ?",
            (saved_as, session),
        )
        self.db.execute(
            "UPDATE heads SET head = (SELECT head FROM snapshots WHERE session = ?"
            " AND name = ?) WHERE session = ?",
            (session, name, session),
        )
        self.db.execute("COMMIT")

    def settings(self) -> str:
        return _settings(self.db)


def _settings(db: sqlite3.Connection) -> str:
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
        db.execute("PRAGMA synchronous").fetchone()[0]
    ]
    return f"journal_mode={mode}, synchronous={sync}"


class Stores:
    """Every contender's database in one folder, filled with the sessions measured."""

    def __init__(self, folder: Path, loop: asyncio.AbstractEventLoop) -> None:
        from agents import SQLiteSession
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from sqlalchemy import create_engine, event

        self.folder, self.loop = folder, loop
        self.raw = {d: Raw(folder / f"raw-{d}.db", d.upper()) for d in ("full", "normal")}
        self.mv = {
            d: memvault.open(f"sqlite:///{folder}/memvault-{d}.db", durability=d)
            for d in ("full", "normal")
        }
        self.agents_path = folder / "agents.db"
        self.agents = {s: SQLiteSession(s, self.agents_path) for s in ("append", *map(str, SIZES))}
        self.lc_path = folder / "langchain.db"
        engine = create_engine(f"sqlite:///{self.lc_path}")

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi: sqlite3.Connection, _record: object) -> None:
            dbapi.execute("PRAGMA journal_mode = WAL")
            dbapi.execute("PRAGMA synchronous = FULL")

        self.lc_engine = engine
        self.lc = {
            s: SQLChatMessageHistory(s, connection=engine) for s in ("append", *map(str, SIZES))
        }

    # -- one call of each operation, per contender ------------------------------------
    def raw_append(self, durability: str) -> Callable[[int], object]:
        raw = self.raw[durability]
        return lambda i: raw.append("append", turn_pairs(i))

    def agents_append(self) -> Callable[[int], object]:
        session = self.agents["append"]

        async def call(i: int) -> None:
            await session.add_items(
                [
                    {"role": r, "content": t}  # type: ignore[misc]
                    for r, t in turn_pairs(i)
                ]
            )

        return on_loop(self.loop, call)

    def history_peers(self, session: str, group: str) -> list[Candidate]:
        agents = self.agents[session]
        return [Candidate(AGENTS, on_loop(self.loop, lambda i: agents.get_items(limit=20)), group)]

    # -- filling -----------------------------------------------------------------------
    def fill(self) -> None:
        for size in SIZES:
            name = str(size)
            for pairs in filling(size):
                for raw in self.raw.values():
                    raw.append(name, pairs)
                for mv in self.mv.values():
                    mv.session(name).append(mv_messages(pairs))
                self.loop.run_until_complete(
                    self.agents[name].add_items([{"role": r, "content": t} for r, t in pairs])
                )  # type: ignore[misc]
                self.lc[name].add_messages(lc_messages(pairs))
            for raw in self.raw.values():
                raw.set_head(name)
                raw.snapshot(name, "base")
            for mv in self.mv.values():
                mv.session(name).snapshot("base")

    def settings(self) -> dict[str, str]:
        with self.lc_engine.connect() as conn:
            lc = _settings(conn.connection.dbapi_connection)  # type: ignore[arg-type]
        agents = self.agents["append"]._get_connection()  # its own thread's connection
        return {
            f"{RAW} (full)": self.raw["full"].settings(),
            f"{RAW} (normal)": self.raw["normal"].settings(),
            f"{MEMVAULT} (full)": _settings(self.mv["full"].backend._connect()),  # type: ignore[attr-defined]
            f"{MEMVAULT} (normal)": _settings(self.mv["normal"].backend._connect()),  # type: ignore[attr-defined]
            AGENTS: _settings(agents),
            LANGCHAIN: lc,
        }


def bench_append(s: Stores, durability: str, calls: int, warmup: int, runs: int) -> Comparison:
    """Append at one durability. Each durability is its own comparison: between calls
    that fsync, an unsynced write would pay for their flushes, not for its own work."""
    total = warmup + runs * calls
    mv_turns = prebuilt(total, mv_turn)
    mv = s.mv[durability].session("append")
    cands = [
        (Candidate(RAW, s.raw_append(durability), durability), s.raw[durability].path),
        (
            Candidate(MEMVAULT, lambda i: mv.append(mv_turns(i)), durability),
            Path(s.mv[durability].backend.path),
        ),
    ]  # type: ignore[attr-defined]
    if durability == "full":  # the peers fsync every commit
        lc_turns = prebuilt(total, lc_turn)
        lc = s.lc["append"]
        cands += [
            (Candidate(AGENTS, s.agents_append(), durability), s.agents_path),
            (Candidate(LANGCHAIN, lambda i: lc.add_messages(lc_turns(i)), durability), s.lc_path),
        ]
    for cand, path in cands:
        warm_wal(path, cand.call)
    return compare(
        "append one 2-message turn",
        [c for c, _ in cands],
        baseline=RAW,
        calls=calls,
        warmup=warmup,
        runs=runs,
        between_runs=progress,
    )


def targets(cmps: dict[str, Comparison]) -> list[str]:
    """The issue's targets, each with the measured figure."""
    out = []
    for d, limit in (("full", 2.0), ("normal", 2.5)):
        if f"append-{d}" in cmps:
            out.append(
                at_most(
                    f"append at {d}: memvault <= {limit:g}x raw sqlite3",
                    cmps[f"append-{d}"],
                    (d, MEMVAULT),
                    (d, RAW),
                    limit,
                )
            )
    if "append-full" in cmps:
        a = cmps["append-full"]
        for peer in (AGENTS, LANGCHAIN):
            r = a.ratio(("full", MEMVAULT), ("full", peer))
            to_raw = a.ratio(("full", peer), ("full", RAW))
            out.append(
                f"- append at full: memvault faster than {peer}: {verdict(r.median < 1)}"
                f" — memvault/peer = {r}; the peer is at {to_raw} of raw"
            )
    if "history" in cmps:
        h = cmps["history"]
        for g in (SMALL, BIG):
            out.append(
                at_most(f"history(last=20) at {g}: <= 2x raw", h, (g, MEMVAULT), (g, RAW), 2)
            )
        out.append(flat_with_size("history(last=20)", h, RAW))
    return out + pointer_targets(cmps, RAW)


def disk(folder: Path) -> str:
    fs = "?"
    with open("/proc/mounts") as mounts:  # the longest mount point holding the folder
        best = ""
        for line in mounts:
            dev, point, kind = line.split()[:3]
            if str(folder).startswith(point) and len(point) > len(best):
                best, fs = point, f"{kind} on {dev}"
    return f"- SQLite {sqlite3.sqlite_version}; database files: {folder} ({fs})"


def main() -> None:
    ap = arguments(
        __doc__, ["append-full", "append-normal", "history", "langchain", "snapshot", "rollback"]
    )
    ap.add_argument(
        "--dir",
        default=None,
        help="folder for the database files (default: a temporary folder under $TMPDIR)",
    )
    args = ap.parse_args()
    calls, warmup, runs = args.calls, args.warmup, args.runs

    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="memvault-bench-") as tmp:
        folder = Path(tmp).resolve()
        facts = machine(
            ["openai-agents", "langchain-community", "langchain-core", "SQLAlchemy", "pydantic"],
            disk(folder),
        )
        s = Stores(folder, loop)
        s.fill()
        cmps = run(
            args.only,
            {
                "append-full": lambda: bench_append(s, "full", calls, warmup, runs),
                "append-normal": lambda: bench_append(s, "normal", calls, warmup, runs),
                **shared_benches(
                    RAW,
                    s.raw["full"],
                    s.mv["full"],
                    args,
                    s.history_peers,
                    LANGCHAIN,
                    lambda session: s.lc[session].messages,
                ),
            },
        )
        settings = s.settings()
    loop.close()
    report(
        args,
        facts,
        [
            "### Durability, as read back from each library's own connection",
            "",
            *[f"- {k}: {v}" for k, v in settings.items()],
            "",
        ],
        cmps,
        targets(cmps),
    )


if __name__ == "__main__":
    main()
