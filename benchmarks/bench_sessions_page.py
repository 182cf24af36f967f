"""One page of sessions (``Store.sessions_page(50)``) at 100 and at 100,000 sessions.

Run from the repository root::

    python benchmarks/bench_sessions_page.py --dir /tmp \\
        --redis-url redis://127.0.0.1:6379/7 --pg-url postgresql://postgres@127.0.0.1:5432/test
    python benchmarks/bench_sessions_page.py --dir /tmp --big 10000 --only sqlite   # smaller
    python benchmarks/bench_sessions_page.py --only redis-cluster   # a private 3-primary cluster

For each backend, two stores: 100 sessions and ``--big`` sessions (one message each,
built with ``generate.py``'s parallel writer). Each order (id, version, length,
updated, expires; ascending) is timed on both stores alternately, call by call: the
first page, and a page from a cursor in the middle of the store. The ratio big/small
is the figure issue 16 asks for (target: within 1.3x). On SQLite, the inspector's
first sessions page (``memvault.ui.views.sessions_page``) is timed the same way.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load, markdown_table
from generate import generate
from harness import Candidate, Comparison, compare

import memvault
from memvault.paging import ORDERS
from memvault.torture.servers import RedisCluster
from memvault.ui import views

PAGE = 50


def _middle_cursor(store: memvault.Store, order: str, sessions: int) -> str | None:
    """The cursor of the page that starts about halfway through the store."""
    page = store.sessions_page(max(1, min(sessions // 2, 10_000)), order=order)
    return page.cursor


def _page(store: memvault.Store, order: str, cursor: str | None) -> Any:
    return lambda i: store.sessions_page(PAGE, cursor=cursor, order=order)


def bench_backend(
    name: str,
    small: memvault.Store,
    big: memvault.Store,
    sizes: tuple[int, int],
    args: argparse.Namespace,
) -> list[Comparison]:
    cmps = []
    for order in ORDERS:
        candidates = []
        for store, size in ((small, sizes[0]), (big, sizes[1])):
            middle = _middle_cursor(store, order, size)
            candidates += [
                Candidate(f"first page @{size:,}", _page(store, order, None), "first"),
                Candidate(f"mid page @{size:,}", _page(store, order, middle), "mid"),
            ]
        cmps.append(
            compare(
                f"{name}: page by {order}",
                candidates,
                baseline=f"first page @{sizes[0]:,}",
                calls=args.calls,
                warmup=args.warmup,
                runs=args.runs,
            )
        )
        print(f"{name} {order} done", file=sys.stderr, flush=True)
    return cmps


def ratios(cmps: list[Comparison], sizes: tuple[int, int]) -> list[str]:
    out = []
    for c in cmps:
        first = c.ratio(
            ("first", f"first page @{sizes[1]:,}"), ("first", f"first page @{sizes[0]:,}")
        )
        mid = c.ratio(("mid", f"mid page @{sizes[1]:,}"), ("mid", f"mid page @{sizes[0]:,}"))
        ok = "met" if first.median <= 1.3 and mid.median <= 1.3 else "NOT met"
        out.append(
            f"- {c.title}: first page {first}, a middle page {mid} at "
            f"{sizes[1]:,} vs {sizes[0]:,} sessions (target <= 1.3x: {ok})"
        )
    return out


def _stores(kind: str, args: argparse.Namespace, size: int) -> tuple[str, dict[str, Any]]:
    if kind == "sqlite":
        return f"sqlite:///{args.dir}/pages-{size}.db", {"durability": "normal"}
    if kind == "redis":
        return f"{args.redis_url}?prefix=bench-pages-{size}", {}
    if kind == "redis-cluster":
        return f"{args.cluster_url}&prefix=bench-pages-{size}", {}
    return f"{args.pg_url}?schema=bench_pages_{size}", {}


def _drop(kind: str, args: argparse.Namespace, size: int) -> None:
    """Remove a store this benchmark built."""
    if kind == "sqlite":
        for tail in ("", "-wal", "-shm"):
            Path(f"{args.dir}/pages-{size}.db{tail}").unlink(missing_ok=True)
    elif kind == "redis-cluster":
        pass  # the private cluster goes with its folder
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=f"bench-pages-{size}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.unlink(*keys[start : start + 1000])
    else:
        import psycopg

        with psycopg.connect(args.pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "bench_pages_{size}" CASCADE')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/7")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--only",
        nargs="*",
        default=["sqlite", "postgres", "redis"],
        help="backends: sqlite, postgres, redis, redis-cluster (a private "
        "3-primary cluster started for the run)",
    )
    args = ap.parse_args()
    with ExitStack() as stack:
        if "redis-cluster" in args.only:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            cluster = RedisCluster(folder, durable=False)
            stack.callback(cluster.close)
            args.cluster_url = cluster.url
        run(args)


def run(args: argparse.Namespace) -> None:
    sizes = (100, args.big)
    lines = [
        "### Command",
        "",
        "```",
        " ".join(["python", *sys.argv]),
        "```",
        "",
        f"- load average at start: {load()}",
        "",
    ]
    tables, verdicts = [], []
    for kind in args.only:
        stores = []
        for size in sizes:
            url, options = _stores(kind, args, size)
            started = time.monotonic()
            generate(url, sessions=size, messages=size, progress=False, **options)
            print(
                f"{kind}: {size:,} sessions in {time.monotonic() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            stores.append(memvault.open(url, **options))
        try:
            cmps = bench_backend(kind, stores[0], stores[1], sizes, args)
            if kind == "sqlite":
                cmps.append(
                    compare(
                        "sqlite: inspector's first sessions page",
                        [
                            Candidate(
                                f"@{size:,}", (lambda s: lambda i: views.sessions_page(s))(store)
                            )
                            for size, store in zip(sizes, stores, strict=True)
                        ],
                        baseline=f"@{sizes[0]:,}",
                        calls=args.calls,
                        warmup=args.warmup,
                        runs=args.runs,
                    )
                )
                verdicts.append(
                    f"- inspector's first sessions page: "
                    f"{cmps[-1].ratio(f'@{sizes[1]:,}', f'@{sizes[0]:,}')} at "
                    f"{sizes[1]:,} vs {sizes[0]:,} sessions"
                )
            tables.append(markdown_table(cmps))
            verdicts += ratios([c for c in cmps if "page by" in c.title], sizes)
        finally:
            for store in stores:
                store.close()
            for size in sizes:
                _drop(kind, args, size)
    print(
        "\n".join(
            [
                *lines,
                "### Medians",
                "",
                *tables,
                "### Targets",
                "",
                *verdicts,
                "",
                f"- load average at end: {load()}",
            ]
        )
    )


if __name__ == "__main__":
    main()
