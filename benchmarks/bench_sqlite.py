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

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Candidate, Comparison, compare, markdown_table, on_loop

import memvault
from memvault import Message

SIZES = (100, 10_000)
USER = "Could you summarise the design document and list the open questions? " * 2
ASSISTANT = ("Here is a summary of the document, with the open questions at the end. " * 8)
RAW = "raw sqlite3"
MEMVAULT = "memvault"
AGENTS = "openai-agents SQLiteSession"
LANGCHAIN = "langchain SQLChatMessageHistory"


def turn_texts(i: int) -> tuple[str, str]:
    return f"{i}: {USER}", f"{i}: {ASSISTANT}"


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

    def append(self, session: str, turns: list[tuple[str, str]]) -> None:
        rows = [(session, json.dumps({"role": role, "content": text}, ensure_ascii=False))
                for role, text in turns]
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO messages (session, body) VALUES (?, ?)", rows)
        self.db.execute("COMMIT")

    def history(self, session: str, last: int) -> list[dict[str, str]]:
        rows = self.db.execute("SELECT body FROM messages WHERE session = ? ORDER BY id DESC"
                               " LIMIT ?", (session, last)).fetchall()
        return [json.loads(r[0]) for r in reversed(rows)]

    def set_head(self, session: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO heads SELECT ?, max(id) FROM messages"
                        " WHERE session = ?", (session, session))

    def snapshot(self, session: str, name: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO snapshots SELECT session, ?, head FROM heads"
                        " WHERE session = ?", (name, session))
        self.db.execute("COMMIT")

    def rollback(self, session: str, name: str, saved_as: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO snapshots SELECT session, ?, head FROM heads"
                        " WHERE session = ?", (saved_as, session))
        self.db.execute("UPDATE heads SET head = (SELECT head FROM snapshots WHERE session = ?"
                        " AND name = ?) WHERE session = ?", (session, name, session))
        self.db.execute("COMMIT")

    def settings(self) -> str:
        return _settings(self.db)


def _settings(db: sqlite3.Connection) -> str:
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[db.execute("PRAGMA synchronous")
                                                        .fetchone()[0]]
    return f"journal_mode={mode}, synchronous={sync}"


class Stores:
    """Every contender's database in one folder, filled with the sessions measured."""

    def __init__(self, folder: Path, loop: asyncio.AbstractEventLoop) -> None:
        from agents import SQLiteSession
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from sqlalchemy import create_engine, event

        self.folder, self.loop = folder, loop
        self.raw = {d: Raw(folder / f"raw-{d}.db", d.upper()) for d in ("full", "normal")}
        self.mv = {d: memvault.open(f"sqlite:///{folder}/memvault-{d}.db", durability=d)
                   for d in ("full", "normal")}
        self.agents_path = folder / "agents.db"
        self.agents = {s: SQLiteSession(s, self.agents_path) for s in ("append", *map(str, SIZES))}
        self.lc_path = folder / "langchain.db"
        engine = create_engine(f"sqlite:///{self.lc_path}")

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi: sqlite3.Connection, _record: object) -> None:
            dbapi.execute("PRAGMA journal_mode = WAL")
            dbapi.execute("PRAGMA synchronous = FULL")

        self.lc_engine = engine
        self.lc = {s: SQLChatMessageHistory(s, connection=engine)
                   for s in ("append", *map(str, SIZES))}

    # -- one call of each operation, per contender ------------------------------------
    def raw_append(self, durability: str) -> Callable[[int], object]:
        raw = self.raw[durability]
        return lambda i: raw.append("append", list(zip(("user", "assistant"), turn_texts(i),
                                                       strict=True)))

    def agents_append(self) -> Callable[[int], object]:
        session = self.agents["append"]

        async def call(i: int) -> None:
            user, assistant = turn_texts(i)
            await session.add_items([{"role": "user", "content": user},
                                     {"role": "assistant", "content": assistant}])
        return on_loop(self.loop, call)

    # -- filling -----------------------------------------------------------------------
    def fill(self) -> None:
        from langchain_core.messages import AIMessage, HumanMessage

        for size in SIZES:
            name = str(size)
            for start in range(0, size, 1000):
                texts = [turn_texts(start + k) for k in range(0, min(1000, size - start), 2)]
                pairs = [(r, t) for u, a in texts for r, t in (("user", u), ("assistant", a))]
                for raw in self.raw.values():
                    raw.append(name, pairs)
                for mv in self.mv.values():
                    mv.session(name).append(
                        [Message(role=r, content=t) for r, t in pairs])  # type: ignore[arg-type]
                self.loop.run_until_complete(self.agents[name].add_items(
                    [{"role": r, "content": t} for r, t in pairs]))  # type: ignore[misc]
                self.lc[name].add_messages([HumanMessage(t) if r == "user" else AIMessage(t)
                                            for r, t in pairs])
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


def mv_turn(i: int) -> list[Message]:
    user, assistant = turn_texts(i)
    return [Message.user(user), Message.assistant(assistant)]


def lc_turn(i: int) -> list[object]:
    from langchain_core.messages import AIMessage, HumanMessage

    user, assistant = turn_texts(i)
    return [HumanMessage(user), AIMessage(assistant)]


def bench_append(s: Stores, durability: str, calls: int, warmup: int, runs: int) -> Comparison:
    """Append at one durability. Each durability is its own comparison: between calls
    that fsync, an unsynced write would pay for their flushes, not for its own work."""
    total = warmup + runs * calls
    mv_turns = {i: mv_turn(i) for i in range(total)}
    mv = s.mv[durability].session("append")
    cands = [(Candidate(RAW, s.raw_append(durability), durability), s.raw[durability].path),
             (Candidate(MEMVAULT, lambda i: mv.append(mv_turns.pop(i, None) or mv_turn(i)),
                        durability), Path(s.mv[durability].backend.path))]  # type: ignore[attr-defined]
    if durability == "full":  # the peers fsync every commit
        lc_turns = {i: lc_turn(i) for i in range(total)}
        lc = s.lc["append"]
        cands += [(Candidate(AGENTS, s.agents_append(), durability), s.agents_path),
                  (Candidate(LANGCHAIN, lambda i: lc.add_messages(lc_turns.pop(i, None)
                                                                  or lc_turn(i)), durability),
                   s.lc_path)]
    for cand, path in cands:
        warm_wal(path, cand.call)
    return compare("append one 2-message turn", [c for c, _ in cands], baseline=RAW,
                   calls=calls, warmup=warmup, runs=runs, between_runs=progress)


def bench_history(s: Stores, calls: int, warmup: int, runs: int) -> Comparison:
    cands = []
    for size in SIZES:
        name, group = str(size), f"{size:,} messages"
        raw, mv, agents = s.raw["full"], s.mv["full"].session(name), s.agents[name]
        cands += [
            Candidate(RAW, lambda i, raw=raw, name=name: raw.history(name, 20), group),
            Candidate(MEMVAULT, lambda i, mv=mv: mv.history(last=20), group),
            Candidate(AGENTS, on_loop(s.loop, lambda i, a=agents: a.get_items(limit=20)), group),
        ]
    return compare("history(last=20)", cands, baseline=RAW, calls=calls, warmup=warmup,
                   runs=runs, between_runs=progress)


def bench_langchain_history(s: Stores, size: int, calls: int, runs: int) -> Comparison:
    """langchain can only read the whole history: its 10,000-message reads take long
    enough to be measured apart, with fewer calls, one size at a time."""
    name, group = str(size), f"{size:,} messages"
    raw, lc = s.raw["full"], s.lc[name]
    cands = [Candidate(RAW, lambda i: raw.history(name, 20), group),
             Candidate(f"{LANGCHAIN} (reads all)", lambda i: lc.messages, group)]
    return compare("history, langchain", cands, baseline=RAW, calls=calls, warmup=2, runs=runs,
                   between_runs=progress)


def bench_pointer(s: Stores, op: str, calls: int, warmup: int, runs: int) -> Comparison:
    cands = []
    for size in SIZES:
        name, group = str(size), f"{size:,} messages"
        raw, mv = s.raw["full"], s.mv["full"].session(name)
        if op == "snapshot":
            raw_call = lambda i, raw=raw, name=name: raw.snapshot(name, f"s{i}")  # noqa: E731
            mv_call = lambda i, mv=mv: mv.snapshot(f"s{i}")  # noqa: E731
        else:
            raw_call = lambda i, raw=raw, name=name: raw.rollback(  # noqa: E731
                name, "base", f"auto:pre-rollback@{i}")
            mv_call = lambda i, mv=mv: mv.rollback("base")  # noqa: E731
        cands += [Candidate(RAW, raw_call, group), Candidate(MEMVAULT, mv_call, group)]
    return compare(op, cands, baseline=RAW, calls=calls, warmup=warmup, runs=runs,
                   between_runs=progress)


def progress() -> None:
    print(".", end="", file=sys.stderr, flush=True)


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def targets(cmps: dict[str, Comparison]) -> list[str]:
    """The issue's targets, each with the measured figure."""
    out = []
    big, small = f"{SIZES[1]:,} messages", f"{SIZES[0]:,} messages"
    for d, limit in (("full", 2.0), ("normal", 3.0)):
        if f"append-{d}" in cmps:
            a = cmps[f"append-{d}"]
            r = a.ratio((d, MEMVAULT), (d, RAW))
            out.append(f"- append at {d}: memvault <= {limit:g}x raw sqlite3: "
                       f"{verdict(r.median <= limit)} — {r} "
                       f"({a[(d, MEMVAULT)].p50 * 1e6:,.0f} µs vs {a[(d, RAW)].p50 * 1e6:,.0f} µs)")
    if "append-full" in cmps:
        a = cmps["append-full"]
        for peer in (AGENTS, LANGCHAIN):
            r = a.ratio(("full", MEMVAULT), ("full", peer))
            to_raw = a.ratio(("full", peer), ("full", RAW))
            out.append(f"- append at full: memvault faster than {peer}: {verdict(r.median < 1)}"
                       f" — memvault/peer = {r}; the peer is at {to_raw} of raw")
    if "history" in cmps:
        h = cmps["history"]
        for g in (small, big):
            r = h.ratio((g, MEMVAULT), (g, RAW))
            out.append(f"- history(last=20) at {g}: <= 2x raw: {verdict(r.median <= 2)} — {r}")
        r = h.ratio((big, MEMVAULT), (small, MEMVAULT))
        raw = h.ratio((big, RAW), (small, RAW))
        out.append(f"- history(last=20) at {big} within 1.3x of at {small}: "
                   f"{verdict(r.median <= 1.3)} — {r} (raw sqlite3: {raw})")
    for op in ("snapshot", "rollback"):
        if op in cmps:
            c = cmps[op]
            r = c.ratio((big, MEMVAULT), (small, MEMVAULT))
            raw = c.ratio((big, RAW), (small, RAW))
            out.append(f"- {op} at {big} within 1.3x of at {small}: {verdict(r.median <= 1.3)}"
                       f" — {r} (raw sqlite3: {raw})")
    return out


def machine(folder: Path) -> list[str]:
    fs = "?"
    with open("/proc/mounts") as mounts:  # the longest mount point holding the folder
        best = ""
        for line in mounts:
            dev, point, kind = line.split()[:3]
            if str(folder).startswith(point) and len(point) > len(best):
                best, fs = point, f"{kind} on {dev}"
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in
                         ("memvault", "openai-agents", "langchain-community", "langchain-core",
                          "SQLAlchemy", "pydantic"))
    return [f"- nproc: {os.cpu_count()}; load average at start: "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            f"- Python {platform.python_version()} ({platform.python_implementation()}), "
            f"SQLite {sqlite3.sqlite_version}, {platform.platform()}",
            f"- database files: {folder} ({fs})",
            f"- {versions}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="timed calls per candidate and run")
    ap.add_argument("--warmup", type=int, default=200, help="untimed calls per candidate first")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of each comparison")
    ap.add_argument("--langchain-calls", type=int, default=20,
                    help="timed calls of langchain's history (it reads all 10,000 messages)")
    ap.add_argument("--only", nargs="*",
                    default=["append-full", "append-normal", "history", "langchain", "snapshot",
                             "rollback"])
    ap.add_argument("--dir", default=None, help="folder for the database files (default: a"
                    " temporary folder under $TMPDIR)")
    ap.add_argument("--out", default=None, help="write the Markdown report there too")
    args = ap.parse_args()

    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="memvault-bench-") as tmp:
        folder = Path(tmp).resolve()
        facts = machine(folder)
        stores = Stores(folder, loop)
        stores.fill()
        cmps: dict[str, Comparison] = {}
        for name in args.only:
            print(f"{name} ", end="", file=sys.stderr, flush=True)
            if name.startswith("append-"):
                cmps[name] = bench_append(stores, name[7:], args.calls, args.warmup, args.runs)
            elif name == "history":
                cmps[name] = bench_history(stores, args.calls, args.warmup, args.runs)
            elif name == "langchain":
                for size in SIZES:
                    cmps[f"{name}-{size}"] = bench_langchain_history(
                        stores, size, args.langchain_calls, args.runs)
            else:
                cmps[name] = bench_pointer(stores, name, args.calls, args.warmup, args.runs)
            print(file=sys.stderr)
        settings = stores.settings()
    loop.close()
    report = [
        "### Command", "", "```", " ".join(["python", *sys.argv]), "```", "",
        "### Machine", "", *facts,
        f"- load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", "",
        "### Durability, as read back from each library's own connection", "",
        *[f"- {k}: {v}" for k, v in settings.items()], "",
        f"### Medians ({args.runs} runs; calls per candidate and run: {args.calls}, langchain "
        f"history {args.langchain_calls}; ratio range = lowest-highest per-run ratio)", "",
        markdown_table(list(cmps.values())),
        "### Targets", "", *targets(cmps), "",
    ]
    text = "\n".join(report)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
