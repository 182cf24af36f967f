"""Big stores: the cost of each operation as the store grows to 1,000,000 messages in
100,000 sessions, against the same operation on an empty store, and bytes per message.

Run from the repository root (``pip install -e ".[bench]"``; Redis and PostgreSQL up)::

    python benchmarks/bench_bigstore.py --plot-dir benchmarks/reports
    python benchmarks/bench_bigstore.py --messages 20000 --sessions 2000 --backends sqlite

Per backend, three stores side by side: memvault's growing store ("big"), an empty
memvault store (fresh file, prefix or schema) and the raw client's growing store (the
same messages, stored by ``bench_<backend>.Raw``'s layout, filled in bulk). The big store
grows in steps (1%, 10%, 100% of ``--messages``) through ``generate.py`` (memvault's
public API, one append per session, several processes); after the last step comes churn,
then the last measurement:

- churn: 5% of the sessions deleted, 5% popped once, 5% snapshotted then rolled back,
  then ``compact()`` (raw: the same sessions' rows deleted, last rows deleted). No manual
  VACUUM or ANALYZE on PostgreSQL (autovacuum is off on this machine's server).
- timed, alternately call by call (``harness.compare``), after a warm-up, at each step:
  ``append`` (one 2-message turn), ``history(last=20)``, ``info``, ``snapshot`` and
  ``rollback`` on a 100-message probe session of each store; raw has no ``info``.
- bytes per message, memvault against raw, at each step before its timed calls (so
  before churn): SQLite, the database file after a WAL checkpoint
  (``wal_checkpoint(TRUNCATE)``); PostgreSQL, ``pg_total_relation_size`` of every table
  of the schema (indexes and TOAST included); Redis, the sum of ``MEMORY USAGE <key>
  SAMPLES 0`` over every key under the store's prefix (exact per key, and blind to other
  users of the server, unlike ``INFO used_memory``). Each minus the same figure for the
  store before it held anything, divided by the messages it holds.

SQLite stores run at ``durability="normal"`` (raw: ``synchronous=NORMAL``), so that the
figures are the store's work and not the disk's fsync. Everything is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import MEMVAULT, filling, load, mv_messages, mv_turn, turn_pairs
from generate import generate, messages_of, session_id
from harness import Candidate, Comparison, compare, markdown_table

import memvault

EMPTY = "memvault, empty store"
PROBE = "probe"
TTL = 3600
OPS = ("append", "history(last=20)", "info", "snapshot", "rollback")
RUN = f"memvault-bigstore-{os.getpid()}"


@dataclass
class Stores:
    """One backend's three stores and how to measure them."""

    name: str
    raw_name: str
    big: memvault.Store
    empty: memvault.Store
    raw: Any
    url: str
    options: dict[str, Any]
    raw_fill: Callable[[int, int, int], None]
    raw_churn: Callable[[list[str], list[str]], None]
    size: Callable[[str], int]
    """bytes held by "big", "empty" or "raw"."""


def bodies(index: int, per_session: int) -> list[str]:
    return [
        json.dumps({"role": m.role, "content": m.content}, ensure_ascii=False)
        for m in messages_of(index, per_session)
    ]


# -- the backends -----------------------------------------------------------------------
@contextmanager
def sqlite_stores(folder: Path) -> Iterator[Stores]:
    from bench_sqlite import Raw

    raw = Raw(folder / "raw.db", "NORMAL")

    def fill(first: int, last: int, per: int) -> None:
        raw.db.execute("BEGIN")
        raw.db.executemany(
            "INSERT INTO messages (session, body) VALUES (?, ?)",
            ((session_id(i), b) for i in range(first, last) for b in bodies(i, per)),
        )
        raw.db.execute("COMMIT")

    def churn(deleted: list[str], popped: list[str]) -> None:
        raw.db.execute("BEGIN")
        raw.db.executemany("DELETE FROM messages WHERE session = ?", ((s,) for s in deleted))
        raw.db.executemany(
            "DELETE FROM messages WHERE id = (SELECT max(id) FROM messages WHERE session = ?)",
            ((s,) for s in popped),
        )
        raw.db.execute("COMMIT")

    def size(which: str) -> int:
        path = folder / {"big": "big.db", "empty": "empty.db", "raw": "raw.db"}[which]
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return path.stat().st_size

    options = {"durability": "normal"}
    big = memvault.open(f"sqlite:///{folder}/big.db", **options)
    empty = memvault.open(f"sqlite:///{folder}/empty.db", **options)
    try:
        yield Stores(
            "SQLite",
            "raw sqlite3",
            big,
            empty,
            raw,
            f"sqlite:///{folder}/big.db",
            options,
            fill,
            churn,
            size,
        )
    finally:
        big.close()
        empty.close()
        raw.db.close()


@contextmanager
def redis_stores(url: str) -> Iterator[Stores]:
    import bench_redis
    import redis

    client = redis.Redis.from_url(url)
    bench_redis.PREFIX = f"{RUN}:raw"
    raw = bench_redis.Raw(client)
    prefixes = {"big": f"{RUN}:big", "empty": f"{RUN}:empty", "raw": f"{RUN}:raw"}

    def fill(first: int, last: int, per: int) -> None:
        pipe = client.pipeline(transaction=False)
        for i in range(first, last):
            key = raw.key(session_id(i))
            pipe.rpush(key, *bodies(i, per))
            pipe.expire(key, TTL)
            if i % 500 == 499:
                pipe.execute()
        pipe.execute()

    def churn(deleted: list[str], popped: list[str]) -> None:
        pipe = client.pipeline(transaction=False)
        for s in deleted:
            pipe.delete(raw.key(s))
        for s in popped:
            pipe.rpop(raw.key(s))
        pipe.execute()

    def keys(which: str) -> Iterator[Any]:
        return client.scan_iter(match=f"{prefixes[which]}:*", count=1000)  # type: ignore[no-any-return]

    def size(which: str) -> int:
        total, pipe = 0, client.pipeline(transaction=False)
        for n, key in enumerate(keys(which), 1):
            pipe.memory_usage(key, samples=0)
            if n % 1000 == 0:
                total += sum(x or 0 for x in pipe.execute())
        return total + sum(x or 0 for x in pipe.execute())

    options: dict[str, Any] = {"prefix": prefixes["big"], "ttl": TTL}
    big = memvault.open(url, **options)
    empty = memvault.open(url, prefix=prefixes["empty"], ttl=TTL)
    try:
        yield Stores("Redis", "raw redis-py", big, empty, raw, url, options, fill, churn, size)
    finally:
        big.close()
        empty.close()
        for which in prefixes:
            batch = list(keys(which))
            for at in range(0, len(batch), 1000):
                client.unlink(*batch[at : at + 1000])
        client.close()


@contextmanager
def postgres_stores(url: str) -> Iterator[Stores]:
    import bench_postgres
    import psycopg
    from psycopg import sql

    schema = RUN.replace("-", "_")
    names = {"big": f"{schema}_big", "empty": f"{schema}_empty", "raw": schema}
    bench_postgres.SCHEMA = schema
    admin = psycopg.connect(url, autocommit=True)
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    raw = bench_postgres.Raw(url)
    table = sql.SQL("{}.messages").format(sql.Identifier(schema))

    def fill(first: int, last: int, per: int) -> None:
        for at in range(first, last, 500):
            ids = [session_id(i) for i in range(at, min(at + 500, last)) for _ in range(per)]
            texts = [b for i in range(at, min(at + 500, last)) for b in bodies(i, per)]
            raw.db.execute(
                sql.SQL(
                    "INSERT INTO {} (session, body) SELECT * FROM unnest(%s::text[], %s::text[])"
                ).format(table),
                (ids, texts),
            )

    def churn(deleted: list[str], popped: list[str]) -> None:
        raw.db.execute(sql.SQL("DELETE FROM {} WHERE session = ANY(%s)").format(table), (deleted,))
        raw.db.execute(
            sql.SQL(
                "DELETE FROM {t} WHERE (session, id) IN (SELECT session,"
                " max(id) FROM {t} WHERE session = ANY(%s) GROUP BY session)"
            ).format(t=table),
            (popped,),
        )

    def size(which: str) -> int:
        row: Any = admin.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN"
            " pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND"
            " c.relkind = 'r'",
            (names[which],),
        ).fetchone()
        return int(row[0])

    options = {"schema": names["big"]}
    big = memvault.open(url, **options)
    empty = memvault.open(url, schema=names["empty"])
    try:
        yield Stores("PostgreSQL", "raw psycopg", big, empty, raw, url, options, fill, churn, size)
    finally:
        big.close()
        empty.close()
        raw.db.close()
        for name in names.values():
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        admin.close()


# -- measuring --------------------------------------------------------------------------
def prepare_probe(st: Stores) -> None:
    """The 100-message probe session, with a snapshot "base", in each store."""
    for pairs in filling(100):
        st.raw.append(PROBE, pairs)
        for store in (st.big, st.empty):
            store.session(PROBE).append(mv_messages(pairs))
    if hasattr(st.raw, "set_head"):
        st.raw.set_head(PROBE)
    else:  # redis: the head pointer is the list's length
        st.raw.r.hset(st.raw.pointers(PROBE)[0], ".head", 100)
    st.raw.snapshot(PROBE, "base")
    for store in (st.big, st.empty):
        store.session(PROBE).snapshot("base")


def step(st: Stores, label: str, calls: int, warmup: int, runs: int) -> list[Comparison]:
    """Each operation on the probe sessions of the three stores, alternately."""
    big, empty = st.big.session(PROBE), st.empty.session(PROBE)
    append_big, append_empty = st.big.session("append"), st.empty.session("append")
    tag = f"{label}-{time.monotonic_ns()}"
    ops: dict[str, list[Candidate]] = {
        "append": [
            Candidate(st.raw_name, lambda i: st.raw.append("append", turn_pairs(i))),
            Candidate(EMPTY, lambda i: append_empty.append(mv_turn(i))),
            Candidate(MEMVAULT, lambda i: append_big.append(mv_turn(i))),
        ],
        "history(last=20)": [
            Candidate(st.raw_name, lambda i: st.raw.history(PROBE, 20)),
            Candidate(EMPTY, lambda i: empty.history(last=20)),
            Candidate(MEMVAULT, lambda i: big.history(last=20)),
        ],
        "info": [
            Candidate(EMPTY, lambda i: empty.info()),
            Candidate(MEMVAULT, lambda i: big.info()),
        ],
        "snapshot": [
            Candidate(st.raw_name, lambda i: st.raw.snapshot(PROBE, f"{tag}-{i}")),
            Candidate(EMPTY, lambda i: empty.snapshot(f"{tag}-{i}")),
            Candidate(MEMVAULT, lambda i: big.snapshot(f"{tag}-{i}")),
        ],
        "rollback": [
            Candidate(st.raw_name, lambda i: st.raw.rollback(PROBE, "base", f"{tag}-r{i}")),
            Candidate(EMPTY, lambda i: empty.rollback("base")),
            Candidate(MEMVAULT, lambda i: big.rollback("base")),
        ],
    }
    return [
        compare(
            f"{st.name} {op} — {label}",
            cands,
            baseline=EMPTY,
            calls=calls,
            warmup=warmup,
            runs=runs,
        )
        for op, cands in ops.items()
    ]


def churn(st: Stores, sessions: int) -> str:
    """Delete, pop and roll back 5% of the sessions each, then compact (no VACUUM)."""
    pick = lambda k: [session_id(i) for i in range(k, sessions, 20)]  # noqa: E731
    deleted, popped, rolled = pick(1), pick(2), pick(3)
    start = time.monotonic()
    for s in deleted:
        st.big.session(s).delete()
    for s in popped:
        st.big.session(s).pop()
    for s in rolled:
        session = st.big.session(s)
        session.snapshot("churn")
        session.append(mv_turn(10_000))
        session.rollback("churn")
    stats = st.big.compact()
    st.raw_churn(deleted, popped)
    return (
        f"churn: {len(deleted):,} sessions deleted, {len(popped):,} popped, "
        f"{len(rolled):,} rolled back, compact() -> {stats} "
        f"({time.monotonic() - start:.0f} s)"
    )


def per_message(st: Stores, held: int, base: dict[str, int]) -> dict[str, float]:
    """Bytes per message held, each store's size when it held nothing subtracted."""
    return {
        who: (st.size(which) - base[which]) / held
        for who, which in (("memvault", "big"), ("raw", "raw"))
    }


def backend(st: Stores, args: argparse.Namespace) -> tuple[list[str], list[dict[str, Any]]]:
    """Grow, measure, churn, measure; the report's lines and the plot's points."""
    per = args.messages // args.sessions
    out = [f"## {st.name}", ""]
    points: list[dict[str, Any]] = []
    base = {which: st.size(which) for which in ("big", "raw")}
    prepare_probe(st)
    done = 0
    steps = [args.sessions // 100, args.sessions // 10, args.sessions]
    for n, upto in enumerate(steps):
        made = generate(st.url, upto, upto * per, args.processes, first=done, **st.options)
        started = time.monotonic()
        st.raw_fill(done, upto, per)
        raw_seconds = time.monotonic() - started
        done = upto
        out.append(
            f"- grown to {upto * per:,} messages: memvault {made}; raw bulk fill "
            f"{raw_seconds:.0f} s; load average {load()}"
        )
        label = f"{upto * per:,} messages"
        # held: the generated sessions, the probe, and the turns appended by earlier steps
        sizes = per_message(
            st, upto * per + 100 + 2 * n * (args.warmup + args.calls * args.runs), base
        )
        if n == len(steps) - 1:
            out.append(f"- {churn(st, upto)}")
            label += " after churn"
        cmps = step(st, label, args.calls, args.warmup, args.runs)
        points.append(
            {
                "messages": upto * per,
                "label": label,
                "bytes": sizes,
                "p50": {
                    c.title.split(" — ")[0]: {k[1]: r.p50 for k, r in c.results.items()}
                    for c in cmps
                },
            }
        )
        out += [
            "",
            f"### {label}",
            "",
            markdown_table(cmps),
            f"Bytes per message: memvault {sizes['memvault']:,.0f}, {st.raw_name} "
            f"{sizes['raw']:,.0f} ({sizes['memvault'] / sizes['raw']:.2f}x raw)",
            "",
        ]
        print(f" {st.name} {label}", file=sys.stderr, flush=True)
    out += targets(st, cmps, sizes)
    return out, points


def targets(st: Stores, cmps: list[Comparison], sizes: dict[str, float]) -> list[str]:
    lines = ["", f"### Targets ({st.name}, after churn)", ""]
    for cmp in cmps:
        r = cmp.ratio(MEMVAULT, EMPTY)
        op = cmp.title.split(" — ")[0]
        lines.append(
            f"- {op}: big store within 1.3x of empty: "
            f"{'**met**' if r.median <= 1.3 else '**not met**'} — {r} "
            f"({cmp[MEMVAULT].p50 * 1e6:,.0f} µs vs {cmp[EMPTY].p50 * 1e6:,.0f} µs)"
        )
    ratio = sizes["memvault"] / sizes["raw"]
    lines.append(
        f"- bytes per message <= 2x raw: {'**met**' if ratio <= 2 else '**not met**'}"
        f" — {ratio:.2f}x ({sizes['memvault']:,.0f} vs {sizes['raw']:,.0f})"
    )
    return [*lines, ""]


def plot(points: dict[str, list[dict[str, Any]]], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(points)
    made = []
    fig, axes = plt.subplots(
        len(names), len(OPS), figsize=(3.2 * len(OPS), 2.8 * len(names)), squeeze=False
    )
    for row, name in zip(axes, names, strict=True):
        pts = points[name]
        xs = [p["messages"] for p in pts]
        for ax, op in zip(row, OPS, strict=True):
            for who, style in ((MEMVAULT, "o-"), (EMPTY, "o:"), (None, "s--")):
                key = who or next(
                    iter(k for k in pts[0]["p50"][f"{name} {op}"] if k not in (MEMVAULT, EMPTY)),
                    None,
                )
                if key is None:
                    continue
                ax.plot(
                    xs,
                    [p["p50"][f"{name} {op}"][key] * 1e6 for p in pts],
                    style,
                    label=key,
                    markersize=4,
                )
            ax.set_xscale("log")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{name}: {op}", fontsize=9)
            ax.grid(alpha=0.3)
        row[0].set_ylabel("p50 (µs)")
        row[0].legend(fontsize=6)
    for ax in axes[-1]:
        ax.set_xlabel("messages in the store")
    fig.suptitle(
        f"Latency vs store size (last point after churn; load average {load()})", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(folder / "bigstore_latency.png", dpi=100)
    plt.close(fig)
    made.append("bigstore_latency.png")

    fig, ax = plt.subplots(figsize=(6, 3.8))
    for n, name in enumerate(names):
        pts = points[name]
        xs = [p["messages"] for p in pts]
        ax.plot(
            xs,
            [p["bytes"]["memvault"] for p in pts],
            "o-",
            color=f"C{n}",
            label=f"memvault, {name}",
        )
        ax.plot(xs, [p["bytes"]["raw"] for p in pts], "s--", color=f"C{n}", label=f"raw, {name}")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("messages in the store")
    ax.set_ylabel("bytes per message")
    ax.set_title("Bytes per message (store size / messages held)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "bigstore_bytes.png", dpi=100)
    plt.close(fig)
    return [*made, "bigstore_bytes.png"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", nargs="+", default=["sqlite", "redis", "postgres"])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument(
        "--dir",
        default=None,
        help="folder for the SQLite files (default: a temporary folder, removed at the end)",
    )
    ap.add_argument("--plot-dir", default=None, help="write the PNGs there")
    ap.add_argument("--json", default=None, help="write the plotted points there")
    args = ap.parse_args()
    # run.py stops a benchmark with SIGTERM: exit through the finally blocks that delete
    # the run's keys, schemas and files
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    lines = [
        "# Big stores",
        "",
        f"- command: `python {' '.join(sys.argv)}`",
        f"- nproc {os.cpu_count()}; load average at start {load()}",
        "",
    ]
    points: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="memvault-bigstore-", dir=args.dir) as tmp:
        makers = {
            "sqlite": lambda: sqlite_stores(Path(tmp)),
            "redis": lambda: redis_stores(args.redis_url),
            "postgres": lambda: postgres_stores(args.pg_url),
        }
        for name in args.backends:
            with makers[name]() as st:
                more, points[st.name] = backend(st, args)
                lines += more
    lines.append(f"load average at end: {load()}")
    if args.plot_dir:
        lines += ["", *(f"![{png}]({png})" for png in plot(points, Path(args.plot_dir)))]
    if args.json:
        Path(args.json).write_text(json.dumps(points, indent=1), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
