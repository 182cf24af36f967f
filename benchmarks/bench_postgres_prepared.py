"""What ``prepared_statements=False`` (for PgBouncer in transaction mode) costs memvault.

Run from the repository root (a server needed; nothing else)::

    python benchmarks/bench_postgres_prepared.py --runs 5 --out /tmp/report.md
    python benchmarks/bench_postgres_prepared.py --bouncer postgresql://app@127.0.0.1:6432/test

Two handles on one schema made for the run (dropped at the end), each with a pool of
one connection, on ``--url``: memvault as it opens by default (psycopg prepares a
statement after its fifth run on a connection) and with ``prepared_statements=False``
(every call parsed and planned anew). With ``--bouncer``, a third handle goes through
that PgBouncer URL, unprepared: the pooler's own cost on top. Appends are one
2-message turn; ``history(last=20)`` reads a session of 1,000 messages.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import arguments, machine, mv_turn, prebuilt, progress, report, run
from harness import Candidate, Comparison, compare

import memvault

PREPARED = "memvault (prepared statements)"
UNPREPARED = "memvault, prepared_statements=False"
BOUNCED = "memvault, prepared_statements=False, through PgBouncer"


def main() -> None:
    ap = arguments(__doc__, ["append", "history"])
    ap.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="the database to use (in a schema made for the run, then dropped)",
    )
    ap.add_argument(
        "--bouncer", default=None, help="the same database through a PgBouncer: a third candidate"
    )
    args = ap.parse_args()
    schema = f"memvault_bench_prepared_{uuid.uuid4().hex[:8]}"
    urls = {
        PREPARED: args.url,
        UNPREPARED: args.url,
        **({BOUNCED: args.bouncer} if args.bouncer else {}),
    }
    stores: dict[str, Any] = {}
    try:
        for name, url in urls.items():
            stores[name] = memvault.open(
                url, schema=schema, min_size=1, max_size=1, prepared_statements=name == PREPARED
            )
        total = args.warmup + args.runs * args.calls
        turns = {name: prebuilt(total, mv_turn) for name in stores}
        for name, store in stores.items():
            store.session(f"history {name}").append([m for i in range(500) for m in mv_turn(i)])

        def bench(op: str) -> Comparison:
            calls = {
                "append": lambda name: (
                    lambda i: stores[name].session(f"append {name}").append(turns[name](i))
                ),
                "history": lambda name: (
                    lambda i: stores[name].session(f"history {name}").history(last=20)
                ),
            }[op]
            title = {
                "append": "append one 2-message turn",
                "history": "history(last=20) of 1,000 messages",
            }[op]
            return compare(
                title,
                [Candidate(name, calls(name)) for name in stores],
                baseline=PREPARED,
                calls=args.calls,
                warmup=args.warmup,
                runs=args.runs,
                between_runs=progress,
            )

        facts = machine(["psycopg", "psycopg-pool"])
        cmps = run(args.only, {op: lambda op=op: bench(op) for op in ("append", "history")})
    finally:
        for store in stores.values():
            store.close()
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    report(args, facts, [], cmps, [])


if __name__ == "__main__":
    main()
