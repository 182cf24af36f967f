"""Where the PostgreSQL append ratio goes: each part priced alone, alternately with the
whole call and with raw psycopg, in one run.

Run from the repository root (needs a server; everything goes into schemas made for
the run, ``memvault_parts_<pid>...``, dropped at the end)::

    python benchmarks/bench_postgres_parts.py --runs 3

Contenders, each on a connection of its own:

- raw psycopg: bench_postgres's Raw.append (json.dumps of 2 messages, one INSERT);
- memvault: ``Session.append`` of a prebuilt 2-message turn (its pool, its encoding);
- memvault's function: the statement ``Session.append`` sends (``SELECT * FROM
  <schema>.append(...)``), sent by plain psycopg with the turn encoded beforehand;
- the function with one part taken out, each in a schema of its own, to price it (not
  correct code: a measurement): ``paging indexes`` (migration 006's four sessions
  indexes dropped, so the session update is a HOT one again), ``event insert``,
  ``row lock`` (the session read without FOR UPDATE), ``ON CONFLICT`` (a plain INSERT
  of the nodes), and all four at once;
- a PL/pgSQL function taking append's arguments that does nothing: a call's floor;
- encoding the turn alone (``encode_batch``, the part of ``Session.append`` before I/O).

Then, for each: the server's execution time of one call and the WAL bytes it writes
(``EXPLAIN (ANALYZE, TIMING OFF, WAL)``, medians of ``--calls`` calls, alternately; no
round trip, no flush, no commit record; the server-wide WAL position would count the
other clients' writes too). Last, the rows
the appends wrote into the lexical search tables (issue 14: search indexing is lazy).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arguments, load, mv_turn, prebuilt, turn_pairs
from harness import Candidate, compare, markdown_table

import memvault
from memvault.backends.base import Write
from memvault.backends.postgres.calls import Calls
from memvault.backends.postgres.migrations import functions
from memvault.messages import encode_batch

LIMITS = (1 << 20, 1000, 1 << 24)
PREFIX = f"memvault_parts_{os.getpid()}"
RAW = "raw psycopg"
_BODY = re.compile(r"CREATE OR REPLACE FUNCTION @schema@\.append_after\(.*?END \$\$;", re.S)


def _cut(text: str, start: str, end: str, instead: str = "") -> str:
    """``text`` with the span from ``start`` up to (not including) ``end`` replaced."""
    i, j = text.index(start), text.index(end)
    return text[:i] + instead + text[j:]


def _without(part: str, body: str, schema: str) -> str:
    """append_after's definition with one part taken out."""
    if part == "event insert":
        return _cut(body, f"    INSERT INTO {schema}.events", "    RETURN v_row.version + 1;")
    if part == "row lock":
        return body.replace("WHERE name = p_session FOR UPDATE", "WHERE name = p_session")
    if part == "ON CONFLICT":
        return body.replace("ON CONFLICT (sid, msg_id) DO NOTHING", "")
    if part == "nothing (a no-op function)":
        return _cut(body, "BEGIN\n", "END $$;", "BEGIN\n    RETURN 0;\n")
    if part == "paging indexes":
        return body
    raise ValueError(part)


PARTS = ("paging indexes", "event insert", "row lock", "ON CONFLICT")
ALL = "all four"


class Schemas:
    """The run's schemas: raw's table, and one memvault schema per contender."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.admin = psycopg.connect(url, autocommit=True)
        self.made: list[str] = []

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True)

    def memvault(self, without: tuple[str, ...] = ()) -> str:
        """A fresh memvault schema whose append_after lacks the parts ``without``."""
        schema = f"{PREFIX}_{len(self.made)}"
        self.made.append(schema)
        memvault.open(self.url, schema=schema).close()
        match = _BODY.search(functions())
        assert match is not None
        body = match.group(0).replace("@schema@", schema)
        for part in without:
            body = _without(part, body, schema)
        if without:
            self.admin.execute(body.encode())
        if "paging indexes" in without:
            for order in ("version", "length", "updated", "expires"):
                self.admin.execute(f"DROP INDEX {schema}.sessions_by_{order}".encode())
        return schema

    def raw(self) -> Callable[[int, str], Any]:
        schema = f"{PREFIX}_raw"
        self.made.append(schema)
        db = self.connect()
        s = sql.Identifier(schema)
        db.execute(
            sql.SQL(
                "CREATE SCHEMA {s}; CREATE TABLE {s}.messages (id bigint GENERATED"
                " ALWAYS AS IDENTITY, session text NOT NULL, body text NOT NULL,"
                " PRIMARY KEY (session, id))"
            ).format(s=s)
        )
        insert = (
            sql.SQL("INSERT INTO {s}.messages (session, body) SELECT %b, unnest(%b::text[])")
            .format(s=s)
            .as_string(db)
        )

        def append(i: int, explain: str = "") -> Any:
            bodies = [
                json.dumps({"role": role, "content": text}, ensure_ascii=False)
                for role, text in turn_pairs(i)
            ]
            return db.execute(explain + insert, ("append", bodies))

        return append

    def direct(self, schema: str, count: int) -> Callable[[int, str], Any]:
        """Session.append's statement on ``schema`` from plain psycopg, the turns of the
        first ``count`` calls encoded beforehand."""
        db, calls = self.connect(), Calls(schema)
        records = prebuilt(count, lambda i: encode_batch(mv_turn(i), *LIMITS))

        def append(i: int, explain: str = "") -> Any:
            call = calls.append("append", records(i), None, None, Write("w", time.time(), None))
            return db.execute(explain + call.sql, call.params)

        return append

    def search_rows(self, schema: str) -> int:
        row = self.admin.execute(
            f"SELECT (SELECT count(*) FROM {schema}.search_docs)"
            f" + (SELECT count(*) FROM {schema}.search_postings)"
            f" + (SELECT count(*) FROM {schema}.search_marks)".encode()
        ).fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        for schema in self.made:
            self.admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
        self.admin.close()


def server_work(rows: list[tuple[Any, ...]]) -> tuple[float, int]:
    """The execution time (seconds) and WAL bytes EXPLAIN (ANALYZE, WAL) reports for
    the statement, nested ones included (the commit record is not counted)."""
    plan = "\n".join(line for (line,) in rows)
    took = re.search(r"Execution Time: ([\d.]+) ms", plan)
    wal = re.search(r"WAL: records=\d+ bytes=(\d+)", plan)  # the top node's: the whole
    assert took is not None
    return float(took.group(1)) / 1000, int(wal.group(1)) if wal else 0


def main() -> None:
    ap = arguments(__doc__, ["append"])
    ap.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = ap.parse_args()
    s = Schemas(args.url)
    try:
        row: Any = s.admin.execute(
            "SELECT version(), current_setting('synchronous_commit'), current_setting('fsync')"
        ).fetchone()
        print(
            f"load average at start: {load()}; {row[0].split(' on ')[0]}; "
            f"synchronous_commit={row[1]}, fsync={row[2]}; nproc {os.cpu_count()}"
        )
        raw = s.raw()
        mv_schema = s.memvault()
        store = memvault.open(args.url, schema=mv_schema)
        session = store.session("append")
        total = args.warmup + args.runs * args.calls
        turns, fresh = prebuilt(total, mv_turn), prebuilt(total, mv_turn)
        named: list[tuple[str, Callable[[int, str], Any]]] = [
            ("memvault's function (pre-encoded)", s.direct(s.memvault(), total)),
            *((f"the function without {p}", s.direct(s.memvault((p,)), total)) for p in PARTS),
            (f"the function without {ALL}", s.direct(s.memvault(PARTS), total)),
            (
                "a no-op function (append's arguments)",
                s.direct(s.memvault(("nothing (a no-op function)",)), total),
            ),
        ]
        cands = [
            Candidate(RAW, lambda i: raw(i, "")),
            Candidate("memvault", lambda i: session.append(turns(i))),
            *(Candidate(name, lambda i, f=f: f(i, "")) for name, f in named),
            Candidate(
                "encoding the turn alone (encode_batch)", lambda i: encode_batch(fresh(i), *LIMITS)
            ),
        ]
        cmp = compare(
            "append parts",
            cands,
            baseline=RAW,
            calls=args.calls,
            warmup=args.warmup,
            runs=args.runs,
        )
        explain = "EXPLAIN (ANALYZE, TIMING OFF, WAL) "
        timed = [(RAW, raw), *named]
        server: dict[str, list[tuple[float, int]]] = {name: [] for name, _ in timed}
        for i in range(20_000_000, 20_000_000 + args.calls):
            for name, f in timed:
                server[name].append(server_work(f(i, explain).fetchall()))
        print(markdown_table([cmp]))
        print("| contender | server execution time, p50 (µs) | WAL bytes per append, p50 |")
        print("|---|---:|---:|")
        for name, _ in timed:
            took, wal = zip(*server[name], strict=True)
            print(
                f"| {name} | {statistics.median(took) * 1e6:.1f} | {statistics.median(wal):,.0f} |"
            )
        store.close()
        print(
            f"\nrows in the search tables after {args.warmup + args.runs * args.calls:,}"
            f" appends: {s.search_rows(mv_schema)}"
        )
    finally:
        s.close()
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
