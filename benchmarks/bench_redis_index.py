"""What the Redis session index costs an append: memvault with it, memvault before it,
and raw redis-py, alternately in one run.

Run from the repository root (in a git checkout: "before" is read from git)::

    python benchmarks/bench_redis_index.py --url redis://127.0.0.1:6379/7 --runs 3
    python benchmarks/bench_redis_index.py --cluster --before d80a6f2   # a private cluster

The contenders append one 2-message turn to one session, each under its own key
prefix (deleted at the end), with the same sliding TTL:

- raw redis-py: ``MULTI`` of ``RPUSH`` and ``EXPIRE`` (``bench_redis.Raw``);
- memvault: the current code, whose write script also keeps the index (a session in
  five sorted sets: four ``ZADD`` a write, one more and the expiry probe when it
  creates the session);
- memvault before the index: the same store code running the write script of
  ``--before`` (the last commit without the index), without the index's keys.

``--sessions`` other sessions are indexed first (the sorted sets' depth: ZADD and
ZREM are O(log n)).

Wall-clock figures on a loaded shared machine are mostly the client and the round
trip, so the server's own time is measured too, on a private ``redis-server`` (no
other client): blocks of ``--block`` appends of each contender in turn (rotating who
goes first), ``CONFIG RESETSTAT`` before each block and the sum of ``INFO
commandstats``' microseconds after it, per append; medians over ``--blocks`` blocks
each, and the median of the per-round ratios.

``--cluster`` times the same append on a private 3-primary Redis Cluster instead:
memvault, whose write there is three scripts (the index's begin, the session's write,
the index's update: docs/redis.md), against memvault's single write script of
``--before`` (the last commit whose cluster kept no index), alternately.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_redis import PREFIX, TTL, Raw
from common import load, markdown_table, mv_turn, prebuilt, turn_pairs
from generate import generate
from harness import Candidate, compare

import memvault
from memvault.backends.base import Write
from memvault.backends.redis.ops import Eval, Layout, Op, Operations, Script, _context
from memvault.torture.servers import RedisCluster, RedisServer

LUA = ("src/memvault/backends/redis/lua", "src/memvault/backends/redis_lua")
"""Where the scripts are, and where they were before the folder per backend."""
ROOT = Path(__file__).resolve().parent.parent


class Before(Operations):
    """The operations with the write script of an earlier commit and no index."""

    def __init__(self, layout: Layout, write: Script) -> None:
        super().__init__(layout, cluster=False)
        self._script = write
        self._expects_message = "expected message id" in write.text

    def _write(self, session_id: str, op: str, w: Write, *args: str | bytes) -> Op[Any]:
        if op == "append" and not self._expects_message:  # scripts before bea0463
            args = (args[0], *args[2:])
        return (yield Eval(self._script, self.layout.keys(session_id), [op, *_context(w), *args]))


def old_write_script(revision: str) -> Script:
    """write.lua as ``revision`` had it (with its common.lua), as Script.load builds it."""

    def show(name: str) -> str:
        for folder in LUA:
            done = subprocess.run(
                ["git", "show", f"{revision}:{folder}/{name}"],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if done.returncode == 0:
                return done.stdout
        raise SystemExit(f"{revision} has no {name} in {' or '.join(LUA)}: {done.stderr}")

    text = f"#!lua\n{show('common.lua')}\n{show('write.lua')}"
    return Script(text, hashlib.sha1(text.encode("utf-8")).hexdigest())


def open_before(url: str, revision: str) -> memvault.Store:
    store = memvault.open(url, prefix=f"{PREFIX}:before", ttl=TTL)
    store.backend._ops = Before(
        Layout(f"{PREFIX}:before"),  # type: ignore[attr-defined]
        old_write_script(revision),
    )
    return store


def server_microseconds(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return float(
        sum(v["usec"] for k, v in stats.items() if k not in ("cmdstat_config", "cmdstat_info"))
    )


@contextmanager
def private(make: Callable[[Path], RedisServer | RedisCluster], sessions: int) -> Iterator[str]:
    """The URL of a private server (``make(folder)``) holding ``sessions`` sessions."""
    with tempfile.TemporaryDirectory() as folder:
        server = make(Path(folder))
        try:
            url = server.url
            generate(
                f"{url}{'&' if '?' in url else '?'}prefix={PREFIX}:mv",
                sessions=sessions,
                messages=sessions,
                progress=False,
            )
            yield url
        finally:
            server.close()


def server_time(args: argparse.Namespace) -> list[str]:
    """The server's microseconds per append of each contender (see the module doc)."""
    with private(lambda folder: RedisServer(folder, durable=False), args.sessions) as url:
        client = redis.Redis.from_url(url)
        raw, now = Raw(client), memvault.open(url, prefix=f"{PREFIX}:mv", ttl=TTL)
        old = open_before(url, args.before)
        serial = iter(range(10**9))
        calls: dict[str, Callable[[], object]] = {
            "raw redis-py": lambda: raw.append("append", turn_pairs(next(serial))),
            "memvault before the index": lambda: old.session("append").append(
                mv_turn(next(serial))
            ),
            "memvault with the index": lambda: now.session("append").append(mv_turn(next(serial))),
        }
        names = list(calls)
        times: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.blocks + 2):  # two rounds of warm-up
            for name in names[round_ % 3 :] + names[: round_ % 3]:
                client.config_resetstat()
                for _ in range(args.block):
                    calls[name]()
                if round_ >= 2:
                    times[name].append(server_microseconds(client) / args.block)
        now.close()
        old.close()
        client.close()
    median = {name: statistics.median(t) for name, t in times.items()}
    added = statistics.median(
        a / b
        for a, b in zip(
            times["memvault with the index"], times["memvault before the index"], strict=True
        )
    )
    return [
        f"Server time per append (private redis-server, {args.sessions:,} sessions "
        f"indexed, {args.blocks} blocks of {args.block} each):",
        "",
        *(f"- {name}: {median[name]:.1f} µs" for name in names),
        f"- with the index / before it: {added:.2f}x (median of the blocks' ratios)",
    ]


def cluster_append(args: argparse.Namespace) -> list[str]:
    """The append's wall clock on a private cluster, with the index and before it."""
    with private(lambda folder: RedisCluster(folder, durable=False), args.sessions) as url:
        indexed = memvault.open(url, prefix=f"{PREFIX}:mv", ttl=TTL)
        before = open_before(url, args.before)
        total = args.warmup + args.runs * args.calls
        turns = {name: prebuilt(total, mv_turn) for name in ("now", "before")}
        now, old = indexed.session("append"), before.session("append")
        cmp = compare(
            "append one 2-message turn (Redis Cluster)",
            [
                Candidate("memvault before the index", lambda i: old.append(turns["before"](i))),
                Candidate("memvault with the index", lambda i: now.append(turns["now"](i))),
            ],
            baseline="memvault before the index",
            calls=args.calls,
            warmup=args.warmup,
            runs=args.runs,
        )
        indexed.close()
        before.close()
    return [
        f"- sessions indexed: {args.sessions:,} (private 3-primary cluster)",
        "",
        markdown_table([cmp]),
        "",
        f"- with the index / before it: "
        f"{cmp.ratio('memvault with the index', 'memvault before the index')}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="redis://127.0.0.1:6379/12")
    ap.add_argument("--before", default="41f68c5")
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument(
        "--cluster", action="store_true", help="time the append on a private Redis Cluster instead"
    )
    args = ap.parse_args()
    if args.cluster:
        started = load()
        print(
            "\n".join(
                [
                    "### Command",
                    "",
                    "```",
                    " ".join(["python", *sys.argv]),
                    "```",
                    "",
                    f"- load average at start: {started}",
                    *cluster_append(args),
                    "",
                    f"- load average at end: {load()}",
                ]
            )
        )
        return
    client = redis.Redis.from_url(args.url)
    started = load()
    generate(
        f"{args.url}?prefix={PREFIX}:mv",
        sessions=args.sessions,
        messages=args.sessions,
        progress=False,
    )
    indexed = memvault.open(args.url, prefix=f"{PREFIX}:mv", ttl=TTL)
    before = open_before(args.url, args.before)
    raw = Raw(client)
    try:
        total = args.warmup + args.runs * args.calls
        turns = {name: prebuilt(total, mv_turn) for name in ("now", "before")}
        now, old = indexed.session("append"), before.session("append")
        cmp = compare(
            "append one 2-message turn",
            [
                Candidate("raw redis-py", lambda i: raw.append("append", turn_pairs(i))),
                Candidate("memvault before the index", lambda i: old.append(turns["before"](i))),
                Candidate("memvault with the index", lambda i: now.append(turns["now"](i))),
            ],
            baseline="raw redis-py",
            calls=args.calls,
            warmup=args.warmup,
            runs=args.runs,
        )
        added = cmp.ratio("memvault with the index", "memvault before the index")
        print(
            "\n".join(
                [
                    "### Command",
                    "",
                    "```",
                    " ".join(["python", *sys.argv]),
                    "```",
                    "",
                    f"- load average at start: {started}",
                    f"- sessions indexed: {args.sessions:,}",
                    "",
                    markdown_table([cmp]),
                    "",
                    f"- with the index / before it: {added}",
                    "",
                    *server_time(args),
                    "",
                    f"- load average at end: {load()}",
                ]
            )
        )
    finally:
        indexed.close()
        before.close()
        keys = list(client.scan_iter(match=f"{PREFIX}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
        client.close()


if __name__ == "__main__":
    main()
