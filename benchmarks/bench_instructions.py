"""Load-independent costs of one call: CPU instructions (callgrind) and WAL frames.

Timings on the shared 2-core machine move with the load; these two figures do not.
For each case, the script runs itself under ``valgrind --tool=callgrind`` twice, with
``--few`` and ``--many`` calls after the same warm-up, and reports (instructions at
many - at few) / (many - few): the cost of one call, start-up and warm-up cancelled.
WAL frames per call are counted after ``PRAGMA wal_checkpoint(TRUNCATE)`` (4 KiB pages), in
the ``--few`` run: from 1,000 frames on, SQLite's auto-checkpoint may start the WAL over,
and its size stops counting what was written (240 memvault appends wrote 5.7 frames each
and the file said 4.17); a ``--few`` run that reaches that size stops the script.

Run from the repository root (valgrind from Debian's package)::

    python benchmarks/bench_instructions.py                   # every case
    python benchmarks/bench_instructions.py --cases lg-mv lg-saver

Cases:

- ``append-mv``: ``Session.append`` of a 2-message turn at ``durability="normal"``,
  beside 100 other sessions; ``append-raw``: bench_sqlite's raw sqlite3 append of the
  same turn (one transaction, a table and its index);
- ``lg-mv``: a LangGraph ``put`` + ``get_tuple`` step of a 10-message thread with
  ``MemvaultSaver`` on SQLite; ``lg-saver``: the same with LangGraph's ``SqliteSaver``
  (bench_langgraph's graph and step).

Noise: the same code's counts moved 0.3-0.7% between runs (PYTHONHASHSEED is fixed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CASES = ("append-mv", "append-raw", "lg-mv", "lg-saver")
WARMUP = 20
AUTOCHECKPOINT = 1000  # SQLite's default wal_autocheckpoint, in frames
OPEN = contextlib.ExitStack()  # the savers' context managers, alive until exit


def prepared(case: str, db: Path) -> Callable[[int], object]:
    """The call to count, on a fresh database, after its warm-up."""
    if case.startswith("lg"):
        from bench_langgraph import echo_graph, step, turn

        if case == "lg-mv":
            from memvault.integrations.langgraph import MemvaultSaver

            saver = OPEN.enter_context(MemvaultSaver.from_conn_string(f"sqlite:///{db}"))
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            saver = OPEN.enter_context(SqliteSaver.from_conn_string(str(db)))
            saver.setup()
        graph = echo_graph(saver)
        for k in range(5):  # a 10-message thread
            turn(graph, {"configurable": {"thread_id": "t"}}, k)
        call = step(saver, "t")
    elif case == "append-mv":
        from common import mv_turn

        import memvault

        store = memvault.open(f"sqlite:///{db}", durability="normal")
        for k in range(100):
            store.session(f"other-{k}").append(mv_turn(k))
        session = store.session("append")
        call = lambda i: session.append(mv_turn(i))  # noqa: E731
    else:
        from bench_sqlite import Raw
        from common import turn_pairs

        raw = Raw(db, "NORMAL")
        for k in range(100):
            raw.append(f"other-{k}", turn_pairs(k))
        call = lambda i: raw.append("append", turn_pairs(i))  # noqa: E731
    for i in range(WARMUP):
        call(1_000_000 + i)
    return call


def child(case: str, calls: int) -> None:
    """Make ``calls`` calls after the warm-up; print the WAL frames they added."""
    db = Path(tempfile.mkdtemp()) / "bench.db"
    call = prepared(case, db)
    with sqlite3.connect(db) as checkpoint:
        checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(calls):
        call(i)
    wal = Path(f"{db}-wal")
    size = wal.stat().st_size if wal.exists() else 0
    print(max(0, size - 32) / (4096 + 24))  # WAL header, then a 24-byte header a frame


def counted(case: str, calls: int) -> tuple[int, float]:
    """(instructions, WAL frames) of a child process making ``calls`` calls."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                case,
                str(calls),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        assert found, "callgrind wrote no total"
        return int(found.group(1)), float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--few", type=int, default=40)
    parser.add_argument("--many", type=int, default=240)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    print(f"| case | instructions a call | WAL frames a call ({args.few} calls) |")
    print("|---|---:|---:|")
    for case in args.cases:
        few, frames = counted(case, args.few)
        if frames >= AUTOCHECKPOINT:
            sys.exit(
                f"{case}: {args.few} calls filled {frames:.0f} WAL frames; from "
                f"{AUTOCHECKPOINT} on, an auto-checkpoint may start the WAL over and "
                "its size stops counting: use a smaller --few"
            )
        many, _ = counted(case, args.many)
        print(
            f"| {case} | {(many - few) / (args.many - args.few):,.0f} | {frames / args.few:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
