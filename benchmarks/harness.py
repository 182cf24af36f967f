"""A small side-by-side benchmark harness, independent of any backend.

Candidates run alternately, call by call (A, B, C, A, B, C, ...), after a warm-up,
so that the machine's drift (other processes, CPU frequency, a checkpoint by the
file system) hits every candidate alike. Each round starts one candidate further
(A B C, B C A, C A B, ...), so no candidate always follows the same neighbour (one
that leaves cold caches or garbage behind). The objects alive before timing starts
(prebuilt input, open stores) are frozen out of the garbage collector, whose full
passes would otherwise walk them all and bill whichever call triggered them.

A comparison may be repeated (``runs``): the reported p50/p90 pool every timed
call of every run; ratios are taken within each run and reported as their median,
with the lowest and highest run, which tells how noisy the machine was.

Each candidate belongs to a ``group`` (say, "100 messages"); its ratio is taken
against the baseline candidate of the same group. Any two candidates can also be
compared with :meth:`Comparison.ratio`, e.g. the same store at 10,000 messages
against itself at 100, measured in the same alternation.

Typical use::

    cmp = compare("append", [Candidate("raw", raw_append), Candidate("mine", my_append)],
                  baseline="raw", calls=2000, warmup=300, runs=3)
    print(markdown_table([cmp]))
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str]
"""A candidate's identity inside a comparison: (group, name)."""


@dataclass(frozen=True)
class Candidate:
    """One contender.

    Attributes:
        name: its label, e.g. ``"raw sqlite3"``; the baseline is named by it.
        call: performs one operation; receives the call's index (0, 1, ...; warm-up
            calls included) so it can pick fresh input, e.g. a unique snapshot name.
        group: ratios are taken against the baseline of the same group.
    """

    name: str
    call: Callable[[int], object]
    group: str = ""

    @property
    def key(self) -> Key:
        return (self.group, self.name)


def quantile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, interpolated between neighbours."""
    ordered = sorted(samples)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class Result:
    """The timed calls of one candidate, in seconds, one list per run."""

    key: Key
    runs: list[list[float]] = field(default_factory=list)

    @property
    def samples(self) -> list[float]:
        return [s for run in self.runs for s in run]

    @property
    def p50(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        return quantile(self.samples, 0.9)

    def run_p50s(self) -> list[float]:
        return [statistics.median(run) for run in self.runs]


@dataclass(frozen=True)
class Ratio:
    """``a`` p50 over ``b`` p50, taken within each run (where both met the same
    drift): the median over runs, and the lowest and highest run."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        if len({round(self.low, 2), round(self.high, 2)}) == 1:
            return f"{self.median:.2f}x"
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f})"


@dataclass
class Comparison:
    """The outcome of :func:`compare`."""

    title: str
    baseline: str
    results: dict[Key, Result]
    calls: int
    warmup: int

    def __getitem__(self, key: Key | str) -> Result:
        return self.results[("", key) if isinstance(key, str) else key]

    def ratio(self, a: Key | str, b: Key | str) -> Ratio:
        """p50 of ``a`` over p50 of ``b``, run by run; see :class:`Ratio`."""
        ra, rb = self[a], self[b]
        per_run = [x / y for x, y in zip(ra.run_p50s(), rb.run_p50s(), strict=True)]
        return Ratio(statistics.median(per_run), min(per_run), max(per_run))

    def baseline_ratio(self, key: Key) -> Ratio | None:
        """The ratio against the baseline of ``key``'s group (None if it has none)."""
        base = (key[0], self.baseline)
        return self.ratio(key, base) if base in self.results else None


def compare(
    title: str,
    candidates: Sequence[Candidate],
    *,
    baseline: str,
    calls: int,
    warmup: int,
    runs: int = 1,
    between_runs: Callable[[], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Comparison:
    """Time ``candidates`` alternately, call by call.

    Args:
        title: what is measured (the table's first column).
        candidates: the contenders, each with a unique (group, name).
        baseline: the name of the candidate every other one of its group is divided by.
        calls: timed calls per candidate and run.
        warmup: untimed calls per candidate before the first run, in the same
            alternation (the call index keeps counting through them).
        runs: repetitions of the timed part.
        between_runs: called between runs (e.g. to print progress).
        clock: the timer.
    """
    keys = [c.key for c in candidates]
    if len(set(keys)) != len(keys):
        raise ValueError("candidates must have unique (group, name) pairs")
    results = {c.key: Result(c.key) for c in candidates}
    n = len(candidates)
    index = 0
    for _ in range(warmup):
        for c in candidates:
            c.call(index)
        index += 1
    gc.collect()
    gc.freeze()
    try:
        for run in range(runs):
            if run and between_runs is not None:
                between_runs()
            timed: list[list[float]] = [[] for _ in candidates]
            for _ in range(calls):
                for k in range(n):
                    at = (index + k) % n
                    call = candidates[at].call
                    start = clock()
                    call(index)
                    timed[at].append(clock() - start)
                index += 1
            for c, out in zip(candidates, timed, strict=True):
                results[c.key].runs.append(out)
    finally:
        gc.unfreeze()
    return Comparison(title, baseline, results, calls, warmup)


def on_loop(
    loop: asyncio.AbstractEventLoop, fn: Callable[[int], Awaitable[Any]]
) -> Callable[[int], object]:
    """A candidate call that runs the coroutine ``fn(i)`` to completion on ``loop``.

    One loop is reused for every call, so its start-up cost is not timed.
    """
    return lambda i: loop.run_until_complete(fn(i))


def _us(seconds: float) -> str:
    micro = seconds * 1e6
    return f"{micro:,.0f}" if micro >= 100 else f"{micro:.1f}"


def markdown_table(comparisons: Sequence[Comparison]) -> str:
    """One Markdown table for several comparisons: p50, p90 (microseconds) and ratio.

    The ratio column divides each candidate's p50 by its group's baseline p50, run
    by run: the median run, then the lowest and highest run when they differ.
    """
    lines = [
        "| figure | candidate | p50 (µs) | p90 (µs) | p50 vs baseline |",
        "|---|---|---:|---:|---:|",
    ]
    for cmp in comparisons:
        for key, result in cmp.results.items():
            group, name = key
            figure = f"{cmp.title} — {group}" if group else cmp.title
            ratio = cmp.baseline_ratio(key)
            shown = "baseline" if name == cmp.baseline else (str(ratio) if ratio else "—")
            lines.append(f"| {figure} | {name} | {_us(result.p50)} | {_us(result.p90)} | {shown} |")
    return "\n".join(lines) + "\n"


__all__ = [
    "Candidate",
    "Comparison",
    "Ratio",
    "Result",
    "compare",
    "markdown_table",
    "on_loop",
    "quantile",
]
