"""The peer target in one table: "memvault within 1.3x of raw and faster than every peer
on every backend", from the figures the per-backend benchmarks wrote (``--json``).

    python benchmarks/peers.py benchmarks/reports        # writes benchmarks/reports/peers.md

``benchmarks/run.py`` runs it after the benchmarks. Each row is one comparison of
``bench_sqlite.py``, ``bench_redis.py`` or ``bench_postgres.py`` (one operation, one
session size): memvault's p50 over raw's, and each peer's p50 over memvault's (above 1:
memvault is faster), each the median of the per-run ratios (lowest-highest run), as the
harness takes them. A peer that can only read a whole history ("reads all") is compared
with memvault's ``history(last=20)``, as its users would have to.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

BACKENDS = {"sqlite": "SQLite", "redis": "Redis", "postgres": "PostgreSQL"}
MEMVAULT = "memvault"
WITHIN = 1.3


def ratio(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """a over b, run by run: median, lowest, highest."""
    per_run = [x / y for x, y in zip(a, b, strict=True)]
    return statistics.median(per_run), min(per_run), max(per_run)


def shown(r: tuple[float, float, float]) -> str:
    median, low, high = r
    return (
        f"{median:.2f}x"
        if round(low, 2) == round(high, 2)
        else (f"{median:.2f}x ({low:.2f}-{high:.2f})")
    )


def rows(backend: str, figures: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    """(figure, memvault / raw, peers, target met) for each comparison and group."""
    out = []
    keys = dict.fromkeys((f["comparison"], f["group"]) for f in figures)
    for comparison, group in keys:
        cands = {
            f["name"]: f for f in figures if (f["comparison"], f["group"]) == (comparison, group)
        }
        mine = cands.get(MEMVAULT)
        if mine is None:
            continue
        base = cands.get(mine["baseline"])
        # beside a peer that reads all, few calls are timed: raw's ratio is the history row's
        reads_all = any(name.endswith("(reads all)") for name in cands)
        vs_raw = ratio(mine["run_p50s"], base["run_p50s"]) if base and not reads_all else None
        peers = {
            name: ratio(f["run_p50s"], mine["run_p50s"])
            for name, f in cands.items()
            if name != mine["baseline"] and not name.startswith(MEMVAULT)
        }
        met = (vs_raw is None or vs_raw[0] <= WITHIN) and all(r[0] > 1 for r in peers.values())
        title = mine["title"] + (f" — {group}" if group else "")
        out.append(
            (
                f"{backend}: {title}",
                shown(vs_raw) if vs_raw else "—",
                "; ".join(f"{name} {shown(r)}" for name, r in peers.items()) or "—",
                met,
            )
        )
    return out


def table(folder: Path) -> str:
    lines = [
        "# memvault against raw and peers, every backend",
        "",
        f"Target: memvault within {WITHIN}x of raw and faster than every peer (a peer's "
        "p50 over memvault's above 1.00x). From the reports in this folder; see "
        "`benchmarks/peers.py` for how.",
        "",
        "| figure | memvault / raw | peer / memvault | target |",
        "|---|---:|---|---|",
    ]
    found = False
    for name, backend in BACKENDS.items():
        path = folder / f"{name}.json"
        if not path.exists():
            continue
        found = True
        for figure, vs_raw, peers, met in rows(backend, json.loads(path.read_text())):
            lines.append(
                f"| {figure} | {vs_raw} | {peers} | {'**met**' if met else '**not met**'} |"
            )
    return "\n".join(lines) + "\n" if found else ""


def write(folder: Path) -> Path | None:
    """Write ``peers.md`` in ``folder`` (None when no per-backend figures are there)."""
    text = table(folder)
    if not text:
        return None
    out = folder / "peers.md"
    out.write_text(text, encoding="utf-8")
    return out


if __name__ == "__main__":
    where = write(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "reports"))
    print(where or "no sqlite.json, redis.json or postgres.json there")
