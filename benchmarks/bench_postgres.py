"""memvault's PostgreSQL backend side by side with raw psycopg and langchain-postgres.

Run from the repository root (needs ``pip install -e ".[bench]"`` and a server)::

    python benchmarks/bench_postgres.py --runs 3 --out /tmp/report.md

Everything lives in two schemas unique to the run (``memvault_bench_<pid>`` for the raw
and langchain tables, ``..._mv`` for memvault's), in the database of ``--url`` (default
``postgresql://postgres@127.0.0.1:5432/test``); both are dropped at the end. Every
commit waits for the server's WAL flush as the server is configured (its
``synchronous_commit`` is in the report). The contenders:

- raw psycopg: the minimal equivalent work, one statement (so one transaction and
  one round trip) per operation, on one connection in autocommit mode, parameters in
  binary format (as memvault sends them: no escaping of the JSON bodies). Append: one
  ``INSERT`` of the turn's two JSON rows into a table whose primary key is (session,
  id) (its only index: with a second one on the id alone, the planner walks that one
  when a session holds most rows). History: the newest 20 rows through the primary
  key, ``json.loads`` each, oldest first. Snapshot: one ``INSERT`` of a named pointer
  (the session's head). Rollback: one statement saving the current pointer under a
  new name and moving it.
- memvault: ``memvault.open("postgresql://...", schema=...)``, its public API (a pool
  of psycopg connections; every operation is one server-side function call).
- langchain-postgres ``PostgresChatMessageHistory`` on its own connection: append is
  its ``executemany`` of the two rows and a commit; it has no way to read only the
  last N messages, so its history figure reads them all, on a second connection in
  autocommit (its read never ends the transaction it begins).

langchain has no snapshot or rollback. Message objects are built before the timed
calls (a user holds them already); encoding them is part of each timed call.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

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
    no_peers,
    pointer_targets,
    prebuilt,
    progress,
    report,
    run,
    shared_benches,
    turn_pairs,
)
from harness import Candidate, Comparison, compare

import memvault

RAW = "raw psycopg"
LANGCHAIN = "langchain-postgres PostgresChatMessageHistory"
SCHEMA = f"memvault_bench_{os.getpid()}"
MV_SCHEMA = f"{SCHEMA}_mv"
LC_TABLE = "lc_messages"


class Raw:
    """Plain psycopg, the least work that stores and reads a conversation."""

    def __init__(self, url: str) -> None:
        self.db = psycopg.connect(url, autocommit=True)
        self.db.execute(
            sql.SQL("""
            CREATE TABLE IF NOT EXISTS {s}.messages (id bigint GENERATED ALWAYS AS IDENTITY,
                                       session text NOT NULL, body text NOT NULL,
                                       PRIMARY KEY (session, id));
            CREATE TABLE IF NOT EXISTS {s}.heads (session text PRIMARY KEY, head bigint NOT NULL);
            CREATE TABLE IF NOT EXISTS {s}.snapshots (session text NOT NULL, name text NOT NULL,
                                        head bigint NOT NULL, PRIMARY KEY (session, name));
        """).format(s=sql.Identifier(SCHEMA))
        )
        q = {
            name: sql.SQL(text).format(s=sql.Identifier(SCHEMA)).as_string(self.db)
            for name, text in {
                "append": "INSERT INTO {s}.messages (session, body) SELECT %b, unnest(%b::text[])",
                "history": "SELECT body FROM {s}.messages WHERE session = %b"
                " ORDER BY id DESC LIMIT %b",
                "set_head": "INSERT INTO {s}.heads SELECT %b, max(id) FROM {s}.messages"
                " WHERE session = %b",
                "snapshot": "INSERT INTO {s}.snapshots SELECT session, %b, head"
                " FROM {s}.heads WHERE session = %b",
                "rollback": "WITH saved AS (INSERT INTO {s}.snapshots SELECT session, %b, head"
                " FROM {s}.heads WHERE session = %b)"
                " UPDATE {s}.heads SET head = (SELECT head FROM {s}.snapshots"
                " WHERE session = %b AND name = %b) WHERE session = %b",
            }.items()
        }
        self.sql = q

    def append(self, session: str, pairs: Pairs) -> None:
        bodies = [
            json.dumps({"role": role, "content": text}, ensure_ascii=False) for role, text in pairs
        ]
        self.db.execute(self.sql["append"], (session, bodies))

    def history(self, session: str, last: int) -> list[dict[str, str]]:
        rows = self.db.execute(self.sql["history"], (session, last)).fetchall()
        return [json.loads(r[0]) for r in reversed(rows)]

    def set_head(self, session: str) -> None:
        self.db.execute(self.sql["set_head"], (session, session))

    def snapshot(self, session: str, name: str) -> None:
        self.db.execute(self.sql["snapshot"], (name, session))

    def rollback(self, session: str, name: str, saved_as: str) -> None:
        self.db.execute(self.sql["rollback"], (saved_as, session, session, name, session))


class Stores:
    """Every contender, in two fresh schemas, filled with the sessions measured."""

    def __init__(self, url: str) -> None:
        from langchain_postgres import PostgresChatMessageHistory

        self.admin = psycopg.connect(url, autocommit=True)
        self.admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        self.raw = Raw(url)
        self.mv = memvault.open(url, schema=MV_SCHEMA)
        # langchain-postgres names its table without a schema: the search path puts it in ours.
        self.lc_db = psycopg.connect(url, options=f"-c search_path={SCHEMA}")
        # The sessions it reads are on a connection of their own, in autocommit:
        # get_messages never ends the transaction its SELECT begins, and a transaction
        # left open holds back the cleanup of every row updated after it began, in
        # every schema. It made the snapshot and rollback comparisons after it 2.5-6x
        # slower for memvault and up to 1.6x for raw, growing with each call.
        self.lc_reads = psycopg.connect(url, autocommit=True, options=f"-c search_path={SCHEMA}")
        PostgresChatMessageHistory.create_tables(self.lc_db, LC_TABLE)
        self.lc = {
            s: PostgresChatMessageHistory(
                LC_TABLE,
                str(uuid.uuid4()),
                sync_connection=self.lc_db if s == "append" else self.lc_reads,
            )
            for s in ("append", *map(str, SIZES))
        }

    def fill(self, churn: int) -> None:
        """The measured sessions; then, with ``churn``, that many other conversations of
        1,000 messages written and deleted in raw's table and memvault's, with no VACUUM
        or ANALYZE after (as on a server whose autovacuum is off); else VACUUM ANALYZE,
        as autovacuum would have done."""
        for size in SIZES:
            name = str(size)
            for pairs in filling(size):
                self.raw.append(name, pairs)
                self.mv.session(name).append(mv_messages(pairs))
                self.lc[name].add_messages(lc_messages(pairs))
            self.raw.set_head(name)
            self.raw.snapshot(name, "base")
            self.mv.session(name).snapshot("base")
        for k in range(churn):
            name = f"churn{k}"
            for pairs in filling(1000):
                self.raw.append(name, pairs)
                self.mv.session(name).append(mv_messages(pairs))
            self.raw.db.execute(
                sql.SQL("DELETE FROM {}.messages WHERE session = %s").format(
                    sql.Identifier(SCHEMA)
                ),
                (name,),
            )
            self.mv.session(name).delete()
        if churn:
            return
        self.admin.execute(
            sql.SQL(
                "VACUUM ANALYZE {s}.messages, {s}.heads, {s}.snapshots,"
                " {s}.{lc}, {mv}.sessions, {mv}.nodes, {mv}.snapshots,"
                " {mv}.events"
            ).format(
                s=sql.Identifier(SCHEMA), mv=sql.Identifier(MV_SCHEMA), lc=sql.Identifier(LC_TABLE)
            )
        )

    def settings(self) -> str:
        row: Any = self.admin.execute(
            "SELECT version(), current_setting('synchronous_commit'), current_setting('fsync')"
        ).fetchone()
        return (
            f"- {row[0].split(' on ')[0]}; synchronous_commit={row[1]}, fsync={row[2]}; "
            f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__})"
        )

    def close(self) -> None:
        """Close every connection, then drop both schemas (only this run's)."""
        self.mv.close()
        self.lc_db.close()
        self.lc_reads.close()
        self.raw.db.close()
        for schema in (SCHEMA, MV_SCHEMA):
            self.admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
        self.admin.close()


def bench_append(s: Stores, calls: int, warmup: int, runs: int) -> Comparison:
    total = warmup + runs * calls
    mv_turns, lc_turns = prebuilt(total, mv_turn), prebuilt(total, lc_turn)
    mv, lc = s.mv.session("append"), s.lc["append"]
    return compare(
        "append one 2-message turn",
        [
            Candidate(RAW, lambda i: s.raw.append("append", turn_pairs(i))),
            Candidate(MEMVAULT, lambda i: mv.append(mv_turns(i))),
            Candidate(LANGCHAIN, lambda i: lc.add_messages(lc_turns(i))),
        ],
        baseline=RAW,
        calls=calls,
        warmup=warmup,
        runs=runs,
        between_runs=progress,
    )


def targets(cmps: dict[str, Comparison]) -> list[str]:
    """ISSUE-4's targets, each with the measured figure, and the other comparisons."""
    out = []
    if "append" in cmps:
        a = cmps["append"]
        out.append(at_most("append: memvault <= 1.3x raw psycopg", a, MEMVAULT, RAW, 1.3))
        out.append(
            f"- append, for comparison: {LANGCHAIN} / memvault = {a.ratio(LANGCHAIN, MEMVAULT)}"
        )
    if "history" in cmps:
        h = cmps["history"]
        out.append(flat_with_size("history(last=20)", h, RAW))
        out += [
            f"- history(last=20) at {g}, for comparison: memvault / raw = "
            f"{h.ratio((g, MEMVAULT), (g, RAW))}"
            for g in (SMALL, BIG)
        ]
    for size, g in zip(SIZES, (SMALL, BIG), strict=True):
        if f"langchain-{size}" in cmps:
            r = cmps[f"langchain-{size}"].ratio((g, f"{LANGCHAIN} (reads all)"), (g, MEMVAULT))
            out.append(
                f"- history at {g}, for comparison: {LANGCHAIN} (reads all) / memvault "
                f"(last 20) = {r}"
            )
    return out + pointer_targets(cmps, RAW)


def main() -> None:
    ap = arguments(__doc__, ["append", "history", "langchain", "snapshot", "rollback"])
    ap.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="the database to use (in two schemas made for the run, then dropped)",
    )
    ap.add_argument(
        "--churn",
        type=int,
        default=0,
        metavar="N",
        help="after filling, write and delete N conversations of 1,000 messages"
        " each and measure without VACUUM or ANALYZE (default: VACUUM ANALYZE)",
    )
    args = ap.parse_args()

    s = Stores(args.url)
    try:
        facts = machine(
            ["langchain-postgres", "langchain-core", "psycopg-pool", "pydantic"], s.settings()
        )
        s.fill(args.churn)
        if args.churn:
            facts.append(
                f"- after churn: {args.churn:,} conversations of 1,000 messages written"
                " and deleted, no VACUUM or ANALYZE since"
            )
        cmps = run(
            args.only,
            {
                "append": lambda: bench_append(s, args.calls, args.warmup, args.runs),
                **shared_benches(
                    RAW,
                    s.raw,
                    s.mv,
                    args,
                    no_peers,
                    LANGCHAIN,
                    lambda session: s.lc[session].messages,
                ),
            },
        )
    finally:
        s.close()
    report(args, facts, [], cmps, targets(cmps))


if __name__ == "__main__":
    main()
