"""The benchmarks' tooling. benchmarks/run.py, the one command that regenerates every
benchmark: it runs the benchmarks picked, writes their reports and an index, and fails
clearly (before running anything) when a service a benchmark needs is missing.
benchmarks/generate.py: builds a genuine store, resumably. No timing is asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, script: str = "run.py") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_quick_run_of_one_benchmark_writes_its_report_and_the_index(tmp_path: Path) -> None:
    done = run("--quick", "--only", "summaries-sqlite", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "ratio (p50)" in (tmp_path / "summaries-sqlite.md").read_text()
    index = (tmp_path / "index.md").read_text()
    assert "| summaries-sqlite |" in index and "| ok |" in index


def test_a_run_of_a_few_keeps_the_other_benchmarks_rows_in_the_index(tmp_path: Path) -> None:
    """Failing: ``--only`` rewrote index.md with the benchmarks it ran alone, so one
    rerun dropped every other report from the index."""
    kept = (
        "| bigstore | 2026-11-23 23:23, full, load 12.82 → 16.47 | 2524 | ok | "
        "[bigstore.md](bigstore.md) | `python benchmarks/bench_bigstore.py` |"
    )
    (tmp_path / "index.md").write_text(f"# Benchmark runs\n\n{kept}\n", encoding="utf-8")
    for _ in range(2):
        done = run("--quick", "--only", "summaries-sqlite", "--out", str(tmp_path))
        assert done.returncode == 0, done.stderr
    rows = [
        line
        for line in (tmp_path / "index.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    assert rows[0].startswith("| benchmark | run |")
    assert rows[2] == kept  # registry order: summaries-sqlite comes first
    assert rows[1].startswith("| summaries-sqlite | ") and ", quick, load " in rows[1]
    assert len(rows) == 3


def test_a_missing_service_stops_the_run_before_anything_runs(tmp_path: Path) -> None:
    done = run(
        "--quick",
        "--only",
        "redis",
        "search-sqlite",
        "--out",
        str(tmp_path),
        "--redis-url",
        "redis://127.0.0.1:1/0",
    )
    assert done.returncode == 2
    assert "redis://127.0.0.1:1/0" in done.stderr and "needed by: redis" in done.stderr
    assert not (tmp_path / "search-sqlite.md").exists()


def test_a_failing_benchmark_is_named_and_fails_the_run(tmp_path: Path) -> None:
    done = run("--quick", "--only", "search-sqlite", "--out", str(tmp_path), "--timeout", "0")
    assert done.returncode == 1
    assert "failed: search-sqlite" in done.stderr
    assert "stopped after 0 s" in (tmp_path / "search-sqlite.log").read_text()


def test_an_unknown_benchmark_is_refused_with_the_known_names() -> None:
    done = run("--only", "no-such-bench")
    assert done.returncode != 0
    assert "no-such-bench" in done.stderr and "sqlite" in done.stderr


def test_a_benchmark_script_refuses_an_unknown_comparison_by_name() -> None:
    """Failing: ``bench_sqlite.py --only append`` (its names are append-full and
    append-normal) ran the benchmarks before it, then died in a KeyError."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); from common import arguments; "
        "arguments('doc', ['append-full', 'history']).parse_args(sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--only", "history", "append"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "invalid choice: 'append'" in done.stderr and "'append-full'" in done.stderr


def test_generate_builds_a_store_that_reads_back_and_resumes(tmp_path: Path) -> None:
    import memvault

    url = f"sqlite:///{tmp_path}/big.db?durability=normal"
    args = (url, "--sessions", "30", "--messages", "120", "--processes", "2", "--verify", "30")
    first = run(*args, script="generate.py")
    assert first.returncode == 0, first.stderr
    assert "120 messages in 30 sessions" in first.stdout
    assert "verified 30 sessions: ok" in first.stdout
    again = run(*args, script="generate.py")  # a second run appends nothing
    assert again.returncode == 0, again.stderr
    with memvault.open(url) as store:
        assert len(store.sessions()) == 30
        s = store.session("big-000029")
        assert [m.id for m in s.history()] == [f"big-000029/{k}" for k in range(4)]
        assert [e.op for e in s.log()] == ["append"]
        s.pop()
    broken = run(*args, script="generate.py")  # a session that differs is reported
    assert broken.returncode == 1 and "big-000029" in broken.stdout


def test_the_peer_table_holds_memvault_to_raw_and_to_every_peer(tmp_path: Path) -> None:
    import json

    from benchmarks import peers

    def fig(name: str, p50s: list[float], group: str = "") -> dict[str, object]:
        return {
            "comparison": "append",
            "title": "append",
            "group": group,
            "name": name,
            "baseline": "raw",
            "run_p50s": p50s,
        }

    (tmp_path / "redis.json").write_text(
        json.dumps(
            [
                fig("raw", [1.0, 1.0, 1.0]),
                fig("memvault", [1.2, 1.25, 1.5]),
                fig("memvault async", [9.0, 9.0, 9.0]),
                fig("peer", [2.4, 1.0, 3.0]),
                fig("raw", [1.0], "big"),
                fig("memvault", [1.4], "big"),
            ]
        )
    )
    assert peers.write(tmp_path) is not None
    rows = (tmp_path / "peers.md").read_text().splitlines()
    assert "| Redis: append | 1.25x (1.20-1.50) | peer 2.00x (0.80-2.00) | **met** |" in rows
    assert "| Redis: append — big | 1.40x | — | **not met** |" in rows
    assert not any("memvault async" in row for row in rows)
    assert peers.write(tmp_path / "nothing-here") is None


def test_stopping_the_run_stops_the_running_benchmark(tmp_path: Path) -> None:
    import os
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--only",
            "summaries-sqlite",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child = None
    for _ in range(200):
        found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        if found.stdout.strip():
            child = int(found.stdout.split()[0])
            break
        time.sleep(0.05)
    assert child is not None
    proc.terminate()
    assert proc.wait(timeout=60) != 0
    time.sleep(0.5)
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        return
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the benchmark outlived run.py")


def test_the_redis_index_benchmark_runs_its_before_script_with_todays_arguments(
    tmp_path: Path,
) -> None:
    # "before the index" runs the write script of 41f68c5 through today's operations,
    # whose append has sent the expected message id as ARGV[7] since bea0463.
    from tests.support.redis import flushed

    done = run("--quick", "--only", "redis-index", "--out", str(tmp_path), "--redis-url", flushed())
    assert done.returncode == 0, (tmp_path / "redis-index.log").read_text()
    assert "memvault before the index" in (tmp_path / "redis-index.md").read_text()
