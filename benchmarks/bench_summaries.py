"""Summaries: history() of a big session summarized down to 20 messages, against
history(last=20) of the same session (the issue's target: within 1.3x).

A session of 10,000 messages (100 appends of 100) is summarized through its
9,980th message, so the context view is the summary and the 20 messages after it.
The two reads alternate, one call each, ``--calls`` times after 20 untimed ones.

    pip install -e ".[dev]"
    python benchmarks/bench_summaries.py --url sqlite:////tmp/bench-sum.db --calls 2000

Prints p50 and p90 of each read (µs) and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import memvault
from memvault import Message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="memory://")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with memvault.open(args.url) as store:
        s = store.session(f"bench-summaries-{uuid.uuid4().hex[:8]}")
        for i in range(100):
            s.append([Message.user(f"turn {i}.{j} " + "lorem ipsum " * 10) for j in range(100)])
        through = s.history(last=21)[0].id
        s.summarize(Message.system("summary " + "lorem ipsum " * 50), through=through)
        assert len(s.history()) == 21 and s.info().summarized == 9_980
        times: dict[str, list[float]] = {"history()": [], "history(last=20)": []}
        for n in range(args.calls + 20):
            for label, call in (
                ("history()", s.history),
                ("history(last=20)", lambda: s.history(last=20)),
            ):
                start = time.perf_counter()
                call()
                if n >= 20:
                    times[label].append((time.perf_counter() - start) * 1e6)
        s.delete()
    p50 = {k: statistics.median(v) for k, v in times.items()}
    for label, values in times.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{label:<18} p50 {p50[label]:8.1f} µs   p90 {p90:8.1f} µs")
    ratio = p50["history()"] / p50["history(last=20)"]
    verdict = "met" if ratio <= 1.3 else "MISSED"
    print(f"ratio (p50)        {ratio:.2f}x  (target <= 1.3x: {verdict})")


if __name__ == "__main__":
    main()
