"""Regenerate every benchmark report and plot with one command.

Run from the repository root (``pip install -e ".[bench,dev]"``; Redis and PostgreSQL
running for the benchmarks that need them)::

    python benchmarks/run.py                 # full mode: the figures RESULTS.md quotes
    python benchmarks/run.py --quick         # minutes: every benchmark, few calls
    python benchmarks/run.py --only sqlite redis --quick
    python benchmarks/run.py --list

Each benchmark runs in its own process, one after the other (they time things: two at
once would measure each other). Its standard output is its Markdown report, written to
``benchmarks/reports/<name>.md`` (RESULTS.md links there; ``--quick`` writes to
``benchmarks/reports/quick/``, which is not kept); its standard error, to
``benchmarks/reports/<name>.log``. A benchmark that fails does not stop the others; the
command exits non-zero and names it. Before anything runs, the services the chosen
benchmarks need are checked, and a missing one stops the run with the URL it tried.
Every temporary file lives in one folder removed at the end (Ctrl-C included); the
benchmarks delete their own keys and schemas. At the end, ``peers.py`` gathers the
per-backend benchmarks' figures into ``peers.md``: memvault against raw and every peer,
and ``index.md`` lists each benchmark's last run (a run of a few keeps the other rows).

To add a benchmark, add one :class:`Entry` to ``BENCHMARKS``. Its arguments may name
``{redis_url}``, ``{pg_url}`` (the services), ``{tmp}`` (this run's temporary folder),
``{json}`` (where a benchmark built on ``common.py`` writes its figures for the summary)
and ``{reports}`` (the reports folder, e.g. for plots).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

HERE = Path(__file__).resolve().parent
REPORTS = HERE / "reports"
REDIS, POSTGRES = "redis", "postgres"


@dataclass(frozen=True)
class Entry:
    """One benchmark: a script in ``benchmarks/`` and its arguments in each mode.

    Attributes:
        name: what ``--only`` picks and the report is named after.
        script: the file in ``benchmarks/``.
        quick: arguments for ``--quick`` (a few minutes for the whole registry).
        full: arguments for the full run (the figures RESULTS.md quotes).
        needs: the services it uses (``REDIS``, ``POSTGRES``).
    """

    name: str
    script: str
    quick: Sequence[str]
    full: Sequence[str]
    needs: Sequence[str] = field(default_factory=tuple)


_PEERS_QUICK = (
    "--calls",
    "100",
    "--warmup",
    "20",
    "--runs",
    "1",
    "--langchain-calls",
    "2",
    "--json",
    "{json}",
)
_PEERS_FULL = (
    "--calls",
    "1000",
    "--warmup",
    "200",
    "--runs",
    "3",
    "--langchain-calls",
    "10",
    "--json",
    "{json}",
)

_SERVICES = ("--redis-url", "{redis_url}", "--pg-url", "{pg_url}")

# compact over the 1M-message store (full) or a small one (quick), while appends run
_COMPACT_QUICK = ("--sessions", "2000", "--messages", "20000", "--rounds", "1", "--idle", "2")

BENCHMARKS: list[Entry] = [
    Entry(
        "sqlite",
        "bench_sqlite.py",
        (*_PEERS_QUICK, "--dir", "{tmp}"),
        (*_PEERS_FULL, "--dir", "{tmp}"),
    ),
    # where SQLite's append and history ratios go, part by part
    Entry(
        "sqlite-parts",
        "bench_sqlite_parts.py",
        ("--calls", "100", "--warmup", "20", "--runs", "1"),
        ("--calls", "1000", "--warmup", "200", "--runs", "3"),
    ),
    # CPU instructions (callgrind) and WAL frames a call: figures the load does not move
    Entry("instructions", "bench_instructions.py", ("--few", "20", "--many", "60"), ()),
    Entry(
        "redis",
        "bench_redis.py",
        (*_PEERS_QUICK, "--url", "{redis_url}"),
        (*_PEERS_FULL, "--url", "{redis_url}"),
        needs=(REDIS,),
    ),
    Entry(
        "postgres",
        "bench_postgres.py",
        (*_PEERS_QUICK, "--url", "{pg_url}"),
        (*_PEERS_FULL, "--url", "{pg_url}"),
        needs=(POSTGRES,),
    ),
    # where PostgreSQL's append ratio goes, part by part (server time and WAL too)
    Entry(
        "postgres-parts",
        "bench_postgres_parts.py",
        ("--calls", "100", "--warmup", "20", "--runs", "1", "--url", "{pg_url}"),
        ("--calls", "1000", "--warmup", "200", "--runs", "3", "--url", "{pg_url}"),
        needs=(POSTGRES,),
    ),
    # history after 400,000 dead node rows (as the issue measured), never vacuumed
    Entry(
        "postgres-churn",
        "bench_postgres.py",
        (
            "--calls",
            "100",
            "--warmup",
            "20",
            "--runs",
            "1",
            "--only",
            "history",
            "--churn",
            "20",
            "--url",
            "{pg_url}",
        ),
        (
            "--calls",
            "1000",
            "--warmup",
            "200",
            "--runs",
            "3",
            "--only",
            "history",
            "--churn",
            "400",
            "--url",
            "{pg_url}",
        ),
        needs=(POSTGRES,),
    ),
    # MemvaultHistory against pydantic-ai's documented one-JSON-row storage and memvault
    Entry(
        "pydantic-ai",
        "bench_pydantic_ai.py",
        ("--calls", "20", "--warmup", "5", "--runs", "1", "--pg", "{pg_url}"),
        ("--calls", "200", "--warmup", "30", "--runs", "3", "--pg", "{pg_url}"),
        needs=(POSTGRES,),
    ),
    Entry(
        "langgraph",
        "bench_langgraph.py",
        (
            "--calls",
            "20",
            "--warmup",
            "5",
            "--runs",
            "1",
            "--turns",
            "40",
            "--every",
            "10",
            "--pg",
            "{pg_url}",
            "--skip-bytes",
        ),
        ("--calls", "200", "--warmup", "30", "--runs", "3", "--pg", "{pg_url}"),
        needs=(POSTGRES,),
    ),
    Entry(
        "search-sqlite",
        "bench_search.py",
        ("--url", "sqlite:///{tmp}/search.db", "--calls", "5"),
        ("--url", "sqlite:///{tmp}/search.db", "--calls", "30"),
    ),
    Entry(
        "search-postgres",
        "bench_search.py",
        ("--url", "{pg_url}", "--calls", "5"),
        ("--url", "{pg_url}", "--calls", "30"),
        needs=(POSTGRES,),
    ),
    Entry(
        "summaries-sqlite",
        "bench_summaries.py",
        ("--url", "sqlite:///{tmp}/summaries.db", "--calls", "100"),
        ("--url", "sqlite:///{tmp}/summaries.db", "--calls", "2000"),
    ),
    Entry(
        "inspector-sqlite",
        "bench_inspector.py",
        ("--url", "sqlite:///{tmp}/ui.db", "--sessions", "1000", "--runs", "3"),
        ("--url", "sqlite:///{tmp}/ui.db", "--sessions", "100000", "--runs", "20"),
    ),
    Entry(
        "sessions-page",
        "bench_sessions_page.py",
        (
            "--dir",
            "{tmp}",
            "--big",
            "2000",
            "--calls",
            "20",
            "--warmup",
            "5",
            "--runs",
            "1",
            *_SERVICES,
        ),
        (
            "--dir",
            "{tmp}",
            "--big",
            "100000",
            "--calls",
            "100",
            "--warmup",
            "20",
            "--runs",
            "3",
            *_SERVICES,
        ),
        needs=(REDIS, POSTGRES),
    ),
    Entry(
        "redis-index",
        "bench_redis_index.py",
        (
            "--url",
            "{redis_url}",
            "--sessions",
            "500",
            "--calls",
            "100",
            "--warmup",
            "20",
            "--runs",
            "1",
            "--blocks",
            "4",
            "--block",
            "50",
        ),
        (
            "--url",
            "{redis_url}",
            "--sessions",
            "10000",
            "--calls",
            "1000",
            "--warmup",
            "200",
            "--runs",
            "3",
            "--blocks",
            "30",
            "--block",
            "200",
        ),
        needs=(REDIS,),
    ),
    # the same two on a private 3-primary Redis Cluster (started by the benchmark)
    Entry(
        "sessions-page-cluster",
        "bench_sessions_page.py",
        (
            "--only",
            "redis-cluster",
            "--big",
            "2000",
            "--calls",
            "20",
            "--warmup",
            "5",
            "--runs",
            "1",
        ),
        (
            "--only",
            "redis-cluster",
            "--big",
            "100000",
            "--calls",
            "200",
            "--warmup",
            "30",
            "--runs",
            "3",
        ),
    ),
    Entry(
        "redis-index-cluster",
        "bench_redis_index.py",
        (
            "--cluster",
            "--before",
            "d80a6f2",
            "--sessions",
            "500",
            "--calls",
            "100",
            "--warmup",
            "20",
            "--runs",
            "1",
        ),
        (
            "--cluster",
            "--before",
            "d80a6f2",
            "--sessions",
            "10000",
            "--calls",
            "1000",
            "--warmup",
            "200",
            "--runs",
            "3",
        ),
    ),
    Entry(
        "throughput",
        "bench_throughput.py",
        (
            "--duration",
            "0.5",
            "--rounds",
            "1",
            "--writers",
            "1",
            "2",
            *_SERVICES,
            "--plot",
            "{reports}/throughput.png",
            "--json",
            "{json}",
        ),
        (
            "--duration",
            "2",
            "--rounds",
            "3",
            *_SERVICES,
            "--plot",
            "{reports}/throughput.png",
            "--json",
            "{json}",
        ),
        needs=(REDIS, POSTGRES),
    ),
    Entry(
        "bigstore",
        "bench_bigstore.py",
        (
            "--messages",
            "20000",
            "--sessions",
            "2000",
            "--calls",
            "50",
            "--warmup",
            "10",
            "--runs",
            "1",
            *_SERVICES,
            "--dir",
            "{tmp}",
            "--plot-dir",
            "{reports}",
            "--json",
            "{json}",
        ),
        (
            "--messages",
            "1000000",
            "--sessions",
            "100000",
            "--calls",
            "300",
            "--warmup",
            "50",
            "--runs",
            "3",
            *_SERVICES,
            "--dir",
            "{tmp}",
            "--plot-dir",
            "{reports}",
            "--json",
            "{json}",
        ),
        needs=(REDIS, POSTGRES),
    ),
    *(
        Entry(f"compact-{name}", "bench_compact.py", (*store, *_COMPACT_QUICK), store, needs=needs)
        for name, store, needs in (
            ("sqlite", ("sqlite:///{tmp}/compact.db?durability=normal",), ()),
            ("postgres", ("{pg_url}", "--schema", "bench_compact", "--drop"), (POSTGRES,)),
            ("redis", ("{redis_url}", "--prefix", "bench-compact", "--drop"), (REDIS,)),
        )
    ),
    *(
        Entry(
            f"vectors-{name}",
            "bench_vectors.py",
            (
                "--url",
                url,
                "--size",
                "2000",
                "--calls",
                "5",
                "--append-calls",
                "50",
                "--runs",
                "1",
                "--compact-calls",
                "3",
            ),
            ("--url", url, "--size", "10000", "--calls", "30", "--append-calls", "500"),
            needs=needs,
        )
        for name, url, needs in (
            ("sqlite", "sqlite:///{tmp}/vectors.db", ()),
            ("postgres", "{pg_url}", (POSTGRES,)),
        )
    ),
]


def registry(names: Sequence[str] | None) -> list[Entry]:
    """The entries named (in registry order), or all; an unknown name is an error."""
    known = {e.name for e in BENCHMARKS}
    unknown = [n for n in names or () if n not in known]
    if unknown:
        raise SystemExit(
            f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return [e for e in BENCHMARKS if not names or e.name in names]


# -- services --------------------------------------------------------------------------
def check_redis(url: str) -> str | None:
    """None if Redis answers at ``url``, else why not."""
    try:
        import redis
    except ImportError:
        return 'redis-py is not installed (pip install -e ".[bench]")'
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=5)
        client.ping()
        client.close()
    except redis.RedisError as exc:
        return f"Redis is not reachable at {url} ({exc})"
    return None


def check_postgres(url: str) -> str | None:
    """None if PostgreSQL accepts a connection at ``url``, else why not."""
    try:
        import psycopg
    except ImportError:
        return 'psycopg is not installed (pip install -e ".[bench]")'
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        return f"PostgreSQL is not reachable at {url} ({str(exc).strip()})"
    return None


def missing_services(entries: Sequence[Entry], urls: dict[str, str]) -> list[str]:
    """One line per service that a chosen benchmark needs and that does not answer."""
    checks = {REDIS: check_redis, POSTGRES: check_postgres}
    problems = []
    for service, check in checks.items():
        users = [e.name for e in entries if service in e.needs]
        if users and (why := check(urls[service])):
            problems.append(f"{why}; needed by: {', '.join(users)}")
    return problems


# -- running ---------------------------------------------------------------------------
@dataclass
class Outcome:
    entry: Entry
    seconds: float
    code: int
    command: list[str]


def command(entry: Entry, quick: bool, context: dict[str, str]) -> list[str]:
    args = entry.quick if quick else entry.full
    return [sys.executable, str(HERE / entry.script), *(a.format(**context) for a in args)]


class Running:
    """One benchmark's process: stdout to ``report``, stderr to ``log``; ``status`` is
    the tail of what it wrote on stderr (what the progress bar shows)."""

    def __init__(self, cmd: list[str], report: Path, log: Path) -> None:
        self.status = ""
        self._out = report.open("w", encoding="utf-8")
        self._err = log.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._out,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            cwd=HERE.parent,
        )
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(64), ""):  # type: ignore[union-attr]
            self._err.write(chunk)
            self._err.flush()
            self.status = (self.status + chunk).replace("\n", " ").strip()[-60:]

    def stop(self, why: str) -> None:
        """End its whole process group (it may have started workers or servers)."""
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, None)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=grace)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.close()
        with open(self._err.name, "a", encoding="utf-8") as err:
            err.write(f"\nrun.py: {why}\n")

    def close(self) -> None:
        self._reader.join(timeout=5)
        self._out.close()
        self._err.close()


def run_all(
    entries: Sequence[Entry], quick: bool, context: dict[str, str], out: Path, timeout: float
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}", markup=False),
    )
    with Progress(*columns) as bar:
        task = bar.add_task("benchmarks", total=len(entries), status="")
        for entry in entries:
            cmd = command(entry, quick, {**context, "json": str(out / f"{entry.name}.json")})
            bar.update(task, description=f"[bold]{entry.name}[/]", status="")
            start = time.monotonic()
            running = Running(cmd, out / f"{entry.name}.md", out / f"{entry.name}.log")
            try:
                while (code := running.proc.poll()) is None:
                    if time.monotonic() - start > timeout:
                        running.stop(f"stopped after {timeout:.0f} s")
                        code = -1
                        break
                    bar.update(task, status=running.status)
                    time.sleep(0.25)
                else:
                    running.close()
            except BaseException:  # Ctrl-C: leave nothing running behind
                running.stop("interrupted")
                raise
            seconds = time.monotonic() - start
            outcomes.append(Outcome(entry, seconds, code, cmd))
            mark = "[green]ok[/]" if code == 0 else f"[red]FAILED ({code})[/]"
            bar.console.print(
                f"{entry.name}: {mark} in {seconds:.0f} s -> {shown(out / (entry.name + '.md'))}"
            )
            bar.advance(task)
        bar.update(task, description="done", status="")
    return outcomes


HEADER = ["| benchmark | run | seconds | result | report | command |", "|---|---|---:|---|---|---|"]


def summary(
    outcomes: Sequence[Outcome], quick: bool, load_start: str, started: str, previous: str = ""
) -> str:
    """``reports/index.md``: each benchmark's row from the run that last ran it (when,
    which mode, the load at start and end, how long, how it ended). A run of a few
    (``--only``) replaces their rows and keeps the others from ``previous``."""
    run = f"{started}, {'quick' if quick else 'full'}, load {load_start} → {load()}"
    rows = {}
    for line in previous.splitlines():  # rows in today's layout only (six cells)
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) == 6 and line not in HEADER:
            rows[cells[0][2:]] = line
    for o in outcomes:
        args = o.entry.quick if quick else o.entry.full
        shown = shlex.join(["python", f"benchmarks/{o.entry.script}", *args])
        rows[o.entry.name] = (
            f"| {o.entry.name} | {run} | {o.seconds:.0f} | "
            f"{'ok' if o.code == 0 else f'failed ({o.code})'} | "
            f"[{o.entry.name}.md]({o.entry.name}.md) | `{shown}` |"
        )
    order = [e.name for e in BENCHMARKS] + sorted(set(rows) - {e.name for e in BENCHMARKS})
    lines = [
        "# Benchmark runs",
        "",
        "Each row comes from the last run of its benchmark (`run`: when it started, in "
        "UTC, its mode, and the load average at its start and end).",
        "",
        *HEADER,
        *(rows[name] for name in order if name in rows),
    ]
    return "\n".join(lines) + "\n"


def shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load() -> str:
    """The load average over the last minute."""
    return f"{os.getloadavg()[0]:.2f}"


def interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="few calls: minutes, not the figures")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run these benchmarks only")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument(
        "--redis-url",
        default=os.environ.get("MEMVAULT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/12"),
        help="Redis database the benchmarks use (keys under prefixes they delete)",
    )
    ap.add_argument(
        "--pg-url",
        default=os.environ.get(
            "MEMVAULT_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
        help="PostgreSQL database the benchmarks use (schemas they drop)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="folder for the reports (default: "
        "benchmarks/reports, or benchmarks/reports/quick with --quick)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds before one benchmark is stopped and counted as failed",
    )
    args = ap.parse_args(argv)
    entries = registry(args.only)
    if args.list:
        for e in entries:
            needs = f" (needs {', '.join(e.needs)})" if e.needs else ""
            print(f"{e.name:<20} {e.script}{needs}")
        return 0
    signal.signal(signal.SIGTERM, interrupted)  # as Ctrl-C: stop the running benchmark too
    urls = {REDIS: args.redis_url, POSTGRES: args.pg_url}
    problems = missing_services(entries, urls)
    if problems:
        print(
            "run.py: cannot start:\n"
            + "\n".join(f"- {p}" for p in problems)
            + "\nStart the service, point --redis-url/--pg-url at it, or leave those "
            "benchmarks out (--only).",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out) if args.out else REPORTS / "quick" if args.quick else REPORTS
    out.mkdir(parents=True, exist_ok=True)
    load_start = load()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="memvault-bench-") as tmp:
        context = {
            "redis_url": args.redis_url,
            "pg_url": args.pg_url,
            "tmp": tmp,
            "reports": str(out),
        }
        outcomes = run_all(entries, args.quick, context, out, args.timeout)
    before = out / "index.md"
    index = summary(
        outcomes,
        args.quick,
        load_start,
        started,
        before.read_text(encoding="utf-8") if before.exists() else "",
    )
    if peers.write(out):
        index += "\nmemvault against raw and peers, every backend: [peers.md](peers.md)\n"
    (out / "index.md").write_text(index, encoding="utf-8")
    failed = [o.entry.name for o in outcomes if o.code != 0]
    if failed:
        print(
            f"run.py: failed: {', '.join(failed)} (see the <name>.log files in {out})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
