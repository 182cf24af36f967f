"""Appends while ``compact()`` runs over a big store: their latency with and without it.

Run from the repository root::

    python benchmarks/bench_compact.py sqlite:////tmp/big.db?durability=normal
    python benchmarks/bench_compact.py postgresql://postgres@127.0.0.1:5432/test --schema bc
    python benchmarks/bench_compact.py redis://127.0.0.1:6379/7 --prefix bc --sessions 10000

The store is built by ``generate.py`` (default 100,000 sessions, 1,000,000 messages;
``--sessions`` / ``--messages`` for a smaller one; a store already built is reused: the
generator only appends what is missing); a first compact (``keep_events=0``) drops its
append events. Then, for ``--rounds`` rounds, in a rotating order:

- ``idle``: an appender process appends one turn (2 messages) to a random session every
  2 ms for ``--idle`` seconds; no compact.
- ``steps``: the same appender while ``compact(keep_events=0)`` runs with ``--batch``
  sessions a step (memvault's default).
- ``one step`` (SQLite and PostgreSQL): the same with compact as it was before steps,
  one write transaction over everything.

Before each compact, one session in ten gets a turn appended and popped (not timed), so
every compact has the same work: walk every session, delete one message and two events
in every tenth. For each phase: the appends' p50 and p99 latency (appends overlapping
the compact; medians over rounds) and compact's total time, with the load average.
Target: p99 during compact < 50 ms.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load
from generate import generate, session_id

import memvault
import memvault.backends.engine.compaction
import memvault.backends.postgres.calls
from memvault import CompactStats, Message
from memvault.backends.engine.core import Engine
from memvault.urls import redact

SPAWN = multiprocessing.get_context("spawn")
PAUSE = 0.002
"""Seconds between two appends of the appender: a steady rate, not a saturating loop."""


def appender(url: str, sessions: int, stop: Any, out: Any, failed: Any) -> None:
    """Append a turn to a random session until ``stop`` is set; put the list of
    (monotonic start, seconds) of every append on ``out``; count in ``failed`` those
    that gave up waiting (their time is kept)."""
    rng = random.Random(os.getpid())
    timings = []
    with memvault.open(url) as store:
        while not stop.is_set():
            s = store.session(session_id(rng.randrange(sessions)))
            turn = [Message.user("how far along is it?"), Message.assistant("nearly there")]
            start = time.monotonic()
            try:
                s.append(turn)
            except memvault.BackendUnavailableError:  # e.g. SQLite's busy_timeout ran out
                failed.value += 1
            timings.append((start, time.monotonic() - start))
            time.sleep(PAUSE)
    out.put(timings)


def with_appends(url: str, sessions: int, work: Callable[[], object]) -> tuple[list[float], float]:
    """Run ``work`` while the appender runs (after 1.5 s of start-up and warm-up); the
    latencies of the appends that overlapped ``work``, and how long ``work`` took."""
    stop, out, failed = SPAWN.Event(), SPAWN.Queue(), SPAWN.Value("i", 0)
    proc = SPAWN.Process(target=appender, args=(url, sessions, stop, out, failed))
    proc.start()
    time.sleep(1.5)  # process start-up, imports, connection, warm-up
    begin = time.monotonic()
    work()
    end = time.monotonic()
    stop.set()
    timings = out.get(timeout=120)
    proc.join(timeout=60)
    if failed.value:
        print(f"{failed.value} appends gave up waiting", file=sys.stderr)
    return [t for s, t in timings if s <= end and s + t >= begin], end - begin


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values) or [float("nan")]
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_garbage(url: str, sessions: int) -> None:
    """A turn appended and popped in every tenth session: with the events dropped
    (``keep_events=0``), a node for compact to delete there."""
    with memvault.open(url) as store:
        for i in range(0, sessions, 10):
            s = store.session(session_id(i))
            s.append([Message.user("soon gone"), Message.assistant("gone")])
            s.pop()


def one_step(url: str) -> CompactStats:
    """compact as it was before steps: one write transaction over everything (the
    engine's plan and deletes both under the write lock; PostgreSQL's compact_step
    over every session at once)."""
    compaction, calls = memvault.backends.engine.compaction, memvault.backends.postgres.calls
    saved = compaction.COMPACT_STEP_NODES, calls.COMPACT_STEP_NODES
    compaction.COMPACT_STEP_NODES = calls.COMPACT_STEP_NODES = 2**62  # type: ignore[misc]
    try:
        with memvault.open(url) as store:
            backend = store.backend
            if isinstance(backend, Engine):
                return compaction.compact(
                    lambda write: backend.transaction(True), 0, time.time(), 2**62, None
                )
            return store.compact(keep_events=0, batch=2**62)
    finally:
        compaction.COMPACT_STEP_NODES, calls.COMPACT_STEP_NODES = saved  # type: ignore[misc]


def steps(url: str, batch: int) -> CompactStats:
    with memvault.open(url) as store:
        return store.compact(keep_events=0, batch=batch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=memvault.model.COMPACT_BATCH)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of the idle phase")
    ap.add_argument("--processes", type=int, default=2, help="for generating the store")
    ap.add_argument("--schema", help="PostgreSQL: the store's schema (added to the URL)")
    ap.add_argument("--prefix", help="Redis: the store's key prefix (added to the URL)")
    ap.add_argument(
        "--drop",
        action="store_true",
        help="delete the store at the end (PostgreSQL: needs --schema; Redis: --prefix)",
    )
    args = ap.parse_args(argv)
    url = args.url
    for name in ("schema", "prefix"):
        if getattr(args, name):
            url += f"{'&' if '?' in url else '?'}{name}={getattr(args, name)}"
    try:
        return measure(args, url)
    finally:
        if args.drop:
            drop(args, url)


def drop(args: argparse.Namespace, url: str) -> None:
    """Delete the store the benchmark built."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)
    elif url.startswith("postgres") and args.schema:
        import psycopg

        with psycopg.connect(args.url.split("?")[0], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{args.schema}" CASCADE')
    elif url.startswith("redis") and args.prefix:
        import redis

        client = redis.Redis.from_url(args.url)
        for key in client.scan_iter(match=f"{args.prefix}:*", count=1000):
            client.delete(key)
        client.close()
    else:
        print(
            "--drop: the store is not one this benchmark can name alone (give --schema "
            "or --prefix); left as it is",
            file=sys.stderr,
        )


def measure(args: argparse.Namespace, url: str) -> int:
    shown = redact(url)
    print(f"generating {args.messages:,} messages in {args.sessions:,} sessions", file=sys.stderr)
    made = generate(url, args.sessions, args.messages, args.processes)
    start = time.monotonic()
    first = steps(url, args.batch)  # warm-up: drops the events of the generated store
    first_s = time.monotonic() - start
    phases: dict[str, Callable[[], object]] = {
        "idle": lambda: time.sleep(args.idle),
        f"steps (batch {args.batch})": lambda: removed.append(steps(url, args.batch)),
    }
    if not url.startswith(("redis", "rediss")):
        phases["one step"] = lambda: removed.append(one_step(url))
    removed: list[CompactStats] = []
    results: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in phases}
    names = list(phases)
    loads = []
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if name != "idle":
                make_garbage(url, args.sessions)
            latencies, seconds = with_appends(url, args.sessions, phases[name])
            results[name].append(
                (percentile(latencies, 0.5), percentile(latencies, 0.99), seconds, len(latencies))
            )
            loads.append(os.getloadavg()[0])
            print(
                f"round {r + 1} {name}: p50 {results[name][-1][0] * 1e3:.2f} ms, "
                f"p99 {results[name][-1][1] * 1e3:.2f} ms, {seconds:.1f} s, "
                f"{len(latencies)} appends, load {load()}",
                file=sys.stderr,
            )
    print(f"### compact while appending: {shown}\n")
    print(
        f"- store: {made.messages:,} messages in {made.sessions:,} sessions "
        f"(generated in {made.seconds:.0f} s); nproc {os.cpu_count()}"
    )
    print(
        f"- first compact (keep_events=0, steps of {args.batch}): {first_s:.1f} s, removed "
        f"{first.events:,} events"
    )
    print(
        f"- each measured compact (keep_events=0) removed "
        f"{sorted({r.nodes for r in removed})} messages and "
        f"{sorted({r.events for r in removed})} events"
    )
    print(
        f"- load average during the rounds: median {statistics.median(loads):.2f} "
        f"(min {min(loads):.2f}, max {max(loads):.2f}); at the end {load()}"
    )
    print(
        f"- medians over {args.rounds} rounds, phases in rotating order; appender: one "
        f"turn every {PAUSE * 1e3:.0f} ms to a random session, its own process\n"
    )
    print("| phase | appends | append p50 (ms) | append p99 (ms) | compact (s) |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in results.items():
        p50, p99, secs, count = (statistics.median(col) for col in zip(*rows, strict=True))
        shown_secs = "-" if name == "idle" else f"{secs:.1f}"
        print(f"| {name} | {count:.0f} | {p50 * 1e3:.2f} | {p99 * 1e3:.2f} | {shown_secs} |")
    p99 = statistics.median(row[1] for row in results[names[1]])
    print(
        f"\nTarget p99 during compact < 50 ms: {p99 * 1e3:.1f} ms, "
        f"{'met' if p99 < 0.05 else 'NOT met'}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
