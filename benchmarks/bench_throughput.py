"""Throughput under concurrency: 1, 2, 4 and 8 writer processes appending turns.

Run from the repository root (``pip install -e ".[bench]"``; Redis and PostgreSQL up)::

    python benchmarks/bench_throughput.py --duration 2 --rounds 3 --plot throughput.png

Every writer is a process of its own (forked, then opening its own connection or store),
appending one 2-message turn per call for ``--duration`` seconds after all writers are
ready (a barrier), (a) each to its own session, (b) all to one session. Appends per
second = acknowledged appends of all writers / duration. Each configuration runs
memvault and the raw client alternately (raw first in odd rounds, memvault first in
even ones), ``--rounds`` times; the table shows the medians and the median of the
per-round ratios (lowest-highest round).

- SQLite: one file per contender in a temporary folder, WAL, durability ``full``
  (memvault's default; raw: ``synchronous=FULL``). Raw = ``bench_sqlite.Raw``: one
  ``BEGIN IMMEDIATE`` transaction inserting the turn's two JSON rows.
- Redis: raw = ``bench_redis.Raw``: ``MULTI RPUSH`` of the two JSON messages and
  ``EXPIRE``; memvault with the same sliding TTL (1 h); keys under a prefix unique to the
  run, deleted at the end.
- PostgreSQL: raw = ``bench_postgres.Raw``: one ``INSERT`` of the two rows (autocommit);
  memvault in a schema of its own; both schemas dropped at the end.
- memory:// is per process (each ``open()`` is a private store): nothing to share, so it
  is not measured here.

The turns are built inside the timed loop on both sides (memvault: two ``Message``
objects with ids ``w<writer>-<turn>-<k>``; raw: the two JSON texts). A writer retries
the same turn on the errors memvault documents as retryable (``BackendUnavailableError``:
nothing applied; ``OutcomeUnknownError``: may have applied, and retrying the same ids is
a no-op if it did), and counts them; any other error is counted as unexpected and ends
the writer. Afterwards every session is read back: memvault's must hold exactly each
writer's acknowledged turns, each writer's in its order, no id twice; raw's must hold as
many rows as acknowledged. A failed check makes the command exit 1 (after the report).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load, turn_pairs

import memvault
from memvault import Message
from memvault.errors import BackendUnavailableError, OutcomeUnknownError

RETRYABLE = (BackendUnavailableError, OutcomeUnknownError)
TTL = 3600
PREFIX = f"memvault-throughput-{os.getpid()}"
MEMVAULT, RAW = "memvault", "raw"


# -- the backends -----------------------------------------------------------------------
@dataclass
class Backend:
    """How a writer process reaches one backend: ``raw()`` builds the raw client (in the
    child), ``mv_url`` opens memvault; ``raw_count(session)`` counts raw's rows."""

    name: str
    raw_name: str
    mv_url: str
    mv_options: dict[str, Any]
    raw: Callable[[], Any]
    raw_count: Callable[[str], int]


@contextmanager
def sqlite_backend(folder: Path) -> Iterator[Backend]:
    from bench_sqlite import Raw

    def count(session: str) -> int:
        return int(
            Raw(folder / "raw.db", "FULL")
            .db.execute("SELECT count(*) FROM messages WHERE session = ?", (session,))
            .fetchone()[0]
        )

    Raw(folder / "raw.db", "FULL").db.close()  # the tables, before writers race to make them
    yield Backend(
        "SQLite",
        "raw sqlite3",
        f"sqlite:///{folder}/mv.db",
        {"durability": "full"},
        lambda: Raw(folder / "raw.db", "FULL"),
        count,
    )


@contextmanager
def redis_backend(url: str) -> Iterator[Backend]:
    import bench_redis
    import redis

    client = redis.Redis.from_url(url)
    bench_redis.PREFIX = f"{PREFIX}:raw"  # inherited by the forked writers
    try:
        yield Backend(
            "Redis",
            "raw redis-py",
            url,
            {"prefix": f"{PREFIX}:mv", "ttl": TTL},
            lambda: bench_redis.Raw(redis.Redis.from_url(url)),
            lambda s: int(client.llen(bench_redis.Raw.key(s))),
        )
    finally:
        keys = list(client.scan_iter(match=f"{PREFIX}:*", count=1000))
        for at in range(0, len(keys), 500):
            client.delete(*keys[at : at + 500])
        client.close()


@contextmanager
def postgres_backend(url: str) -> Iterator[Backend]:
    import bench_postgres
    import psycopg
    from psycopg import sql

    schema = f"memvault_throughput_{os.getpid()}"
    bench_postgres.SCHEMA = schema  # inherited by the forked writers
    admin = psycopg.connect(url, autocommit=True)
    try:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        bench_postgres.Raw(url).db.close()
        memvault.open(url, schema=f"{schema}_mv").close()  # migrated once, before the race

        def count(session: str) -> int:
            row: Any = admin.execute(
                sql.SQL("SELECT count(*) FROM {}.messages WHERE session = %s").format(
                    sql.Identifier(schema)
                ),
                (session,),
            ).fetchone()
            return int(row[0])

        yield Backend(
            "PostgreSQL",
            "raw psycopg",
            url,
            {"schema": f"{schema}_mv"},
            lambda: bench_postgres.Raw(url),
            count,
        )
    finally:
        for name in (schema, f"{schema}_mv"):
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        admin.close()


# -- one writer process -----------------------------------------------------------------
def mv_turn(writer: int, turn: int) -> list[Message]:
    return [
        Message(id=f"w{writer}-{turn}-{k}", role=role, content=text)  # type: ignore[arg-type]
        for k, (role, text) in enumerate(turn_pairs(turn))
    ]


def writer(
    backend: Backend,
    who: str,
    session: str,
    number: int,
    duration: float,
    barrier: Any,
    results: Any,
) -> None:
    """Append turns to ``session`` for ``duration`` seconds after the barrier."""
    if who == MEMVAULT:
        with memvault.open(backend.mv_url, **backend.mv_options) as store:
            s = store.session(session)
            appending(lambda i: s.append(mv_turn(number, i)), number, duration, barrier, results)
    else:
        raw = backend.raw()
        appending(lambda i: raw.append(session, turn_pairs(i)), number, duration, barrier, results)


def appending(
    append: Callable[[int], object], number: int, duration: float, barrier: Any, results: Any
) -> None:
    errors: Counter[str] = Counter()
    turn = 0
    unexpected = ""

    def one() -> bool:
        nonlocal unexpected
        while True:
            try:
                append(turn)
                return True
            except RETRYABLE as exc:
                errors[type(exc).__name__] += 1
            except Exception as exc:  # an error memvault does not document as retryable
                errors[f"unexpected {type(exc).__name__}"] += 1
                unexpected = f"{type(exc).__name__}: {exc}"
                return False

    for _ in range(3):  # warm-up: connections, prepared statements, caches
        if not one():
            break
        turn += 1
    warm = turn
    barrier.wait()
    end = time.perf_counter() + duration
    while not unexpected and time.perf_counter() < end:
        if one():
            turn += 1
    results.put(
        {
            "writer": number,
            "timed": turn - warm,
            "turns": turn,
            "errors": dict(errors),
            "unexpected": unexpected,
        }
    )


# -- one configuration ------------------------------------------------------------------
@dataclass
class Run:
    backend: str
    mode: str
    writers: int
    who: str
    per_second: float
    errors: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


def measure(backend: Backend, who: str, mode: str, writers: int, duration: float, tag: str) -> Run:
    """``writers`` processes appending for ``duration`` seconds; then the check."""
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    sessions = [f"{tag}-{who}-{mode}-{writers}-{n if mode == 'own' else 0}" for n in range(writers)]
    procs = [
        ctx.Process(target=writer, args=(backend, who, sessions[n], n, duration, barrier, results))
        for n in range(writers)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=duration + 300) for _ in procs]
    for p in procs:
        p.join()
    run = Run(backend.name, mode, writers, who, sum(g["timed"] for g in got) / duration)
    for g in got:
        run.errors.update(g["errors"])
        if g["unexpected"]:
            run.problems.append(f"writer {g['writer']}: {g['unexpected']}")
    run.problems += check(backend, who, sessions, {g["writer"]: g["turns"] for g in got})
    return run


def check(backend: Backend, who: str, sessions: list[str], turns: dict[int, int]) -> list[str]:
    """What is wrong with the sessions written (empty: every acknowledged turn is there
    once, each writer's in order)."""
    problems = []
    for session in sorted(set(sessions)):
        writers = [n for n in turns if sessions[n] == session]
        want = 2 * sum(turns[n] for n in writers)
        if who == RAW:
            if (have := backend.raw_count(session)) != want:
                problems.append(f"{session}: {have} rows, {want} acknowledged")
            continue
        with memvault.open(backend.mv_url, **backend.mv_options) as store:
            ids = [m.id for m in store.session(session).history()]
        if len(ids) != want or len(set(ids)) != len(ids):
            problems.append(
                f"{session}: {len(ids)} messages ({len(set(ids))} distinct), {want} acknowledged"
            )
        for n in writers:
            mine = [i for i in ids if i.startswith(f"w{n}-")]
            if mine != [f"w{n}-{t}-{k}" for t in range(turns[n]) for k in (0, 1)]:
                problems.append(f"{session}: writer {n}'s turns missing or out of order")
    return problems


# -- the whole run ----------------------------------------------------------------------
def backends(names: list[str], args: argparse.Namespace, folder: Path) -> Iterator[Any]:
    makers = {
        "sqlite": lambda: sqlite_backend(folder),
        "redis": lambda: redis_backend(args.redis_url),
        "postgres": lambda: postgres_backend(args.pg_url),
    }
    for name in names:
        yield makers[name]()


def table(runs: list[Run], rounds: int) -> tuple[str, list[dict[str, Any]]]:
    lines = [
        "| backend | sessions | writers | raw appends/s | memvault appends/s | "
        "memvault / raw | retryable errors (memvault; raw) | check |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    rows = []
    keys = dict.fromkeys((r.backend, r.mode, r.writers) for r in runs)
    for backend, mode, writers in keys:
        mine = [r for r in runs if (r.backend, r.mode, r.writers) == (backend, mode, writers)]
        raw = [r.per_second for r in mine if r.who == RAW]
        mv = [r.per_second for r in mine if r.who == MEMVAULT]
        ratios = [m / r for m, r in zip(mv, raw, strict=True) if r]
        errs = [sum((r.errors for r in mine if r.who == w), Counter()) for w in (MEMVAULT, RAW)]
        problems = [p for r in mine for p in r.problems]
        ratio = (
            (
                f"{statistics.median(ratios):.2f}x"
                + (f" ({min(ratios):.2f}-{max(ratios):.2f})" if rounds > 1 else "")
            )
            if ratios
            else "—"
        )
        shown = "; ".join(
            ", ".join(f"{k} {v}" for k, v in sorted(e.items())) or "none" for e in errs
        )
        lines.append(
            f"| {backend} | {'one each' if mode == 'own' else 'all in one'} | "
            f"{writers} | {statistics.median(raw):,.0f} | {statistics.median(mv):,.0f}"
            f" | {ratio} | {shown} | {'; '.join(problems) or 'ok'} |"
        )
        rows.append(
            {
                "backend": backend,
                "mode": mode,
                "writers": writers,
                "raw": statistics.median(raw),
                "memvault": statistics.median(mv),
                "ratio": statistics.median(ratios) if ratios else None,
                "errors": [dict(e) for e in errs],
                "problems": problems,
            }
        )
    return "\n".join(lines) + "\n", rows


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["backend"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for mode, style in (("own", "-"), ("one", "--")):
            mine = [r for r in rows if r["backend"] == name and r["mode"] == mode]
            xs = [r["writers"] for r in mine]
            label = "own sessions" if mode == "own" else "one session"
            ax.plot(
                xs,
                [r["memvault"] for r in mine],
                style,
                marker="o",
                color="C0",
                label=f"memvault, {label}",
            )
            ax.plot(
                xs, [r["raw"] for r in mine], style, marker="s", color="C1", label=f"raw, {label}"
            )
        ax.set_title(name)
        ax.set_xlabel("writer processes")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("appends/s (2-message turns)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Throughput vs writers (load average {load()})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", nargs="+", default=["sqlite", "redis", "postgres"])
    ap.add_argument("--writers", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--duration", type=float, default=2.0, help="timed seconds per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--plot", default=None, help="write the PNG there")
    ap.add_argument("--json", default=None, help="write the table's rows there")
    args = ap.parse_args()
    # run.py stops a benchmark with SIGTERM: exit through the finally blocks that delete
    # the run's keys, schemas and files
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    start_load = load()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="memvault-throughput-") as tmp:
        for made in backends(args.backends, args, Path(tmp)):
            with made as backend:
                for rnd in range(args.rounds):
                    for mode in ("own", "one"):
                        for n in args.writers:
                            order = (RAW, MEMVAULT) if rnd % 2 == 0 else (MEMVAULT, RAW)
                            for who in order:
                                runs.append(
                                    measure(backend, who, mode, n, args.duration, f"r{rnd}")
                                )
                                print(".", end="", file=sys.stderr, flush=True)
                print(f" {backend.name}", file=sys.stderr, flush=True)
    text, rows = table(runs, args.rounds)
    print(
        f"### Throughput under concurrency\n\n- command: `python {' '.join(sys.argv)}`\n"
        f"- nproc {os.cpu_count()}; load average at start {start_load}, at end {load()}\n"
        f"- {args.duration:g} s per run, {args.rounds} rounds, medians; memory:// is per "
        f"process and not measured\n\n{text}"
    )
    own = [r for r in rows if r["mode"] == "own" and r["ratio"] is not None]
    if own:
        worst = min(own, key=lambda r: r["ratio"])
        met = all(r["ratio"] >= 0.7 for r in own)
        print(
            f"- (a) memvault >= 0.7x raw, own sessions, every backend and writer count: "
            f"{'**met**' if met else '**not met**'} (lowest: {worst['ratio']:.2f}x, "
            f"{worst['backend']}, {worst['writers']} writers)"
        )
    one = [r for r in rows if r["mode"] == "one"]
    if one:
        bad = [p for r in one for p in r["problems"]]
        print(
            f"- (b) one session: no turn lost or duplicated, only retryable errors: "
            f"{'**met**' if not bad else '**not met**: ' + '; '.join(bad)}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if args.plot:
        plot(rows, Path(args.plot))
        print(f"\n![throughput vs writers]({Path(args.plot).name})")
    if any(r["problems"] for r in rows):
        sys.exit(
            "bench_throughput: a check failed (lost, duplicated or misordered turns, or "
            "an error memvault does not document as retryable): see the report"
        )


if __name__ == "__main__":
    main()
