"""Where the SQLite append and history ratios go: each part measured alone, alternately
with the whole call and with raw sqlite3, in one run (durability="normal").

Run from the repository root::

    python benchmarks/bench_sqlite_parts.py --runs 5

Append parts (each on its own database file, warmed past the first checkpoint):

- raw sqlite3: bench_sqlite's Raw.append (json.dumps of 2 messages, one transaction
  inserting 2 rows into a table and its index);
- memvault: ``Session.append`` of a prebuilt 2-message turn;
- backend.append: the same turn encoded beforehand: the engine and its SQL only;
- encode: ``encode_batch`` of a turn alone (validation, serialization, read-back);
- memvault's SQL: plain sqlite3 issuing the statements memvault's append issues, on
  a memvault store, with the values bound in advance: SQLite's share;
- WAL pages per append, memvault and raw (the frames their commits add).

History parts (a 100-message session; ``last=20``): raw's whole call, its query and
its json.loads alone; memvault's whole call, ``backend.history`` (the query and the
chain check) and the decoding of the 20 stored bodies alone. memvault's decoder
remembers the bodies it decoded lately (``messages._decoded``): reading the same
tail again, as these calls do, finds them there; the "first read" figures empty
that memory before each call.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sqlite import Raw, warm_wal
from common import arguments, filling, load, mv_messages, mv_turn, prebuilt, turn_pairs
from harness import Candidate, Comparison, compare, markdown_table

import memvault
from memvault.backends.base import Write
from memvault.backends.sqlite.schema import rowid_of
from memvault.backends.sqlite.txn import live_ids_sql
from memvault.messages import _decoded, decode_message, encode_batch

LIMITS = (1 << 20, 1000, 1 << 24)
forget = _decoded.clear
"""Empties the decoder's memory of recent bodies: the next read decodes them all,
as the first read of a session's tail does."""


def replay(path: Path, without: str = "") -> Candidate:
    """memvault's append statements, in its order, from plain sqlite3: read the
    session row with which of the ids it stores, insert the nodes, save the row's
    changed columns, log the event (no search statement: the session's pending was set by its first
    append; no paging index entry: the session is unsettled since its second append,
    schema 7). ``without``: one part left out, to price it: "events" (its insert)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(
        "INSERT INTO sessions (name, head, depth, base, version, next_node, created_at,"
        " updated_at) VALUES ('replay', 0, 0, 0, 0, 1, 0, 0)"
    )
    sid = db.execute("SELECT sid FROM sessions WHERE name = 'replay'").fetchone()[0]
    bodies = [r.body for r in encode_batch(mv_turn(0), *LIMITS)]

    def call(i: int) -> None:
        node = 2 * i + 10
        db.execute("BEGIN IMMEDIATE")
        db.execute(live_ids_sql(2), (f"r{node}", f"r{node + 1}", "replay")).fetchall()
        db.executemany(
            "INSERT INTO nodes (id, sid, node, parent, depth, msg_id, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (rowid_of(sid, n), sid, n, n - 1, n, f"r{n}", b)
                for n, b in zip((node, node + 1), bodies, strict=True)
            ],
        )
        db.execute(
            "UPDATE sessions SET head=?, depth=?, version=?, next_node=?, updated_at=? WHERE sid=?",
            (node + 1, node + 1, i + 10, node + 2, time.time(), sid),
        )
        if without != "events":
            db.execute(
                "INSERT INTO events (sid, id, version, op, writer, at, head_before,"
                " base_before, head_after, base_after, detail) VALUES (?1, (SELECT"
                " ifnull(max(id), 0) + 1 FROM events WHERE sid = ?1), ?2, 'append',"
                " 'w', ?3, ?4, 0, ?5, 0, ?6)",
                (sid, i + 10, time.time(), node - 1, node + 1, json.dumps({"messages": 2})),
            )
        db.execute("COMMIT")

    return Candidate(
        f"memvault's SQL (plain sqlite3){' without ' if without else ''}{without}", call, "append"
    )


def pages_per_append(path: Path, append: object, count: int = 60) -> float:
    """WAL frames an append adds (fewer than the 1,000 that start a checkpoint)."""
    wal = Path(f"{path}-wal")
    frames = lambda: (wal.stat().st_size - 32) // (4096 + 24)  # noqa: E731
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    start = 10_000_000
    append(start)  # type: ignore[operator]
    before = frames()
    for i in range(start + 1, start + 1 + count):
        append(i)  # type: ignore[operator]
    return (frames() - before) / count


def append_parts(folder: Path, calls: int, warmup: int, runs: int) -> tuple[Comparison, str]:
    raw = Raw(folder / "raw.db", "NORMAL")
    mv = memvault.open(f"sqlite:///{folder}/mv.db", durability="normal")
    engine = memvault.open(f"sqlite:///{folder}/engine.db", durability="normal")
    variants = ("", "events")
    for k in range(len(variants)):
        memvault.open(f"sqlite:///{folder}/replay{k}.db", durability="normal").close()
    total = warmup + runs * calls + 3000
    turns, fresh = prebuilt(total, mv_turn), prebuilt(total, mv_turn)
    records = prebuilt(total, lambda i: encode_batch(mv_turn(i), *LIMITS))
    session, backend = mv.session("append"), engine.backend
    cands = [
        (
            Candidate("raw sqlite3", lambda i: raw.append("append", turn_pairs(i)), "append"),
            folder / "raw.db",
        ),
        (Candidate("memvault", lambda i: session.append(turns(i)), "append"), folder / "mv.db"),
        (
            Candidate(
                "backend.append (pre-encoded)",
                lambda i: backend.append(
                    "append", records(i), None, None, Write("w", time.time(), None)
                ),
                "append",
            ),
            folder / "engine.db",
        ),
        *(
            (replay(folder / f"replay{k}.db", v), folder / f"replay{k}.db")
            for k, v in enumerate(variants)
        ),
    ]
    for cand, path in cands:
        warm_wal(path, cand.call)
    parts = [c for c, _ in cands] + [
        Candidate("encode (encode_batch)", lambda i: encode_batch(fresh(i), *LIMITS), "append"),
        Candidate(
            "raw's json.dumps",
            lambda i: [
                json.dumps({"role": r, "content": t}, ensure_ascii=False) for r, t in turn_pairs(i)
            ],
            "append",
        ),
    ]
    cmp = compare(
        "append parts", parts, baseline="raw sqlite3", calls=calls, warmup=warmup, runs=runs
    )
    more = prebuilt(0, mv_turn)
    pages = (
        f"WAL pages per append: memvault "
        f"{pages_per_append(folder / 'mv.db', lambda i: session.append(more(i))):.2f}, "
        f"raw sqlite3 {pages_per_append(folder / 'raw.db', cands[0][0].call):.2f}"
    )
    mv.close()
    engine.close()
    return cmp, pages


def history_parts(folder: Path, calls: int, warmup: int, runs: int) -> Comparison:
    raw = Raw(folder / "raw-h.db", "NORMAL")
    mv = memvault.open(f"sqlite:///{folder}/mv-h.db", durability="normal")
    for pairs in filling(100):
        raw.append("h", pairs)
        mv.session("h").append(mv_messages(pairs))
    session, backend = mv.session("h"), mv.backend
    stored = backend.history("h", 20, time.time())
    rows = raw.db.execute(
        "SELECT body FROM messages WHERE session = 'h' ORDER BY id DESC LIMIT 20"
    ).fetchall()
    query = "SELECT body FROM messages WHERE session = ? ORDER BY id DESC LIMIT ?"
    cmp = compare(
        "history(last=20) parts",
        [
            Candidate("raw sqlite3", lambda i: raw.history("h", 20), "history"),
            Candidate(
                "raw's query", lambda i: raw.db.execute(query, ("h", 20)).fetchall(), "history"
            ),
            Candidate(
                "raw's json.loads x20", lambda i: [json.loads(r[0]) for r in rows], "history"
            ),
            Candidate("memvault", lambda i: session.history(last=20), "history"),
            Candidate(
                "memvault, first read", lambda i: (forget(), session.history(last=20)), "history"
            ),
            Candidate(
                "backend.history", lambda i: backend.history("h", 20, time.time()), "history"
            ),
            Candidate(
                "decode_message x20",
                lambda i: [decode_message("h", d, b) for d, b in stored],
                "history",
            ),
            Candidate(
                "decode_message x20, first read",
                lambda i: (forget(), [decode_message("h", d, b) for d, b in stored]),
                "history",
            ),
        ],
        baseline="raw sqlite3",
        calls=calls,
        warmup=warmup,
        runs=runs,
    )
    mv.close()
    return cmp


def main() -> None:
    ap = arguments(__doc__, ["append", "history"])
    args = ap.parse_args()
    print(
        f"load average at start: {load()}; SQLite {sqlite3.sqlite_version}; nproc {os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory(prefix="memvault-parts-") as tmp:
        folder = Path(tmp)
        cmps, notes = [], []
        if "append" in args.only:
            cmp, pages = append_parts(folder, args.calls, args.warmup, args.runs)
            cmps.append(cmp)
            notes.append(pages)
        if "history" in args.only:
            cmps.append(history_parts(folder, args.calls, args.warmup, args.runs))
    print(markdown_table(cmps))
    print(*notes, f"load average at end: {load()}", sep="\n")


if __name__ == "__main__":
    main()
