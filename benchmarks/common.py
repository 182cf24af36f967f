"""What the backend benchmarks share, beside the harness: the conversation they store,
the comparisons every backend runs (history, snapshot, rollback against a raw client),
the target checks, the command line and the report around the tables.

Every "raw" contender implements :class:`RawStore`: the least work its client needs
to store and read a conversation, with a named pointer for snapshot and rollback.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Candidate, Comparison, compare, markdown_table

from memvault import Message

SIZES = (100, 10_000)
SMALL, BIG = (f"{size:,} messages" for size in SIZES)
USER = "Could you summarise the design document and list the open questions? " * 2
ASSISTANT = "Here is a summary of the document, with the open questions at the end. " * 8
MEMVAULT = "memvault"
Pairs = list[tuple[str, str]]
"""(role, text) of each message, oldest first."""


class RawStore(Protocol):
    """A raw client doing the minimal equivalent work of each operation."""

    def append(self, session: str, pairs: Pairs) -> None: ...

    def history(self, session: str, last: int) -> list[dict[str, str]]: ...

    def snapshot(self, session: str, name: str) -> None: ...

    def rollback(self, session: str, name: str, saved_as: str) -> None: ...


def turn_texts(i: int) -> tuple[str, str]:
    return f"{i}: {USER}", f"{i}: {ASSISTANT}"


def turn_pairs(i: int) -> Pairs:
    user, assistant = turn_texts(i)
    return [("user", user), ("assistant", assistant)]


def filling(size: int) -> Iterator[Pairs]:
    """The first ``size`` messages of a conversation, in batches of 1,000 (memvault's
    batch limit)."""
    for start in range(0, size, 1000):
        yield [pair for k in range(start, min(start + 1000, size), 2) for pair in turn_pairs(k)]


def mv_messages(pairs: Pairs) -> list[Message]:
    return [Message(role=r, content=t) for r, t in pairs]  # type: ignore[arg-type]


def mv_turn(i: int) -> list[Message]:
    return mv_messages(turn_pairs(i))


def lc_messages(pairs: Pairs) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [HumanMessage(t) if r == "user" else AIMessage(t) for r, t in pairs]


def lc_turn(i: int) -> list[Any]:
    return lc_messages(turn_pairs(i))


def prebuilt(calls: int, make: Callable[[int], list[Any]]) -> Callable[[int], list[Any]]:
    """``make(i)`` for every call index, built before timing starts (a user holds its
    messages already); indexes past ``calls`` are built when asked."""
    built = {i: make(i) for i in range(calls)}
    return lambda i: built.pop(i, None) or make(i)


def progress() -> None:
    print(".", end="", file=sys.stderr, flush=True)


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


# -- the comparisons every backend runs ---------------------------------------------
def history_comparison(
    raw_name: str,
    raw: RawStore,
    mv: Any,
    extra: Callable[[str, str], list[Candidate]],
    calls: int,
    warmup: int,
    runs: int,
) -> Comparison:
    """history(last=20) at each size: raw, memvault (a sync store), and ``extra(session,
    group)`` (the peers that can read the last N)."""
    cands = []
    for size in SIZES:
        name, group = str(size), f"{size:,} messages"
        session = mv.session(name)
        cands += [
            Candidate(raw_name, lambda i, name=name: raw.history(name, 20), group),
            Candidate(MEMVAULT, lambda i, s=session: s.history(last=20), group),
            *extra(name, group),
        ]
    return compare(
        "history(last=20)",
        cands,
        baseline=raw_name,
        calls=calls,
        warmup=warmup,
        runs=runs,
        between_runs=progress,
    )


def reads_all_comparison(
    raw_name: str,
    raw: RawStore,
    mv: Any,
    size: int,
    peer: str,
    read_all: Callable[[], object],
    calls: int,
    runs: int,
) -> Comparison:
    """A peer that can only read the whole history, at one size, next to raw's and
    memvault's history(last=20): its 10,000-message reads take long enough to be
    measured apart, with fewer calls."""
    name, group = str(size), f"{size:,} messages"
    session = mv.session(name)
    cands = [
        Candidate(raw_name, lambda i: raw.history(name, 20), group),
        Candidate(MEMVAULT, lambda i: session.history(last=20), group),
        Candidate(f"{peer} (reads all)", lambda i: read_all(), group),
    ]
    return compare(
        f"history, {peer}",
        cands,
        baseline=raw_name,
        calls=calls,
        warmup=2,
        runs=runs,
        between_runs=progress,
    )


def pointer_comparison(
    op: str, raw_name: str, raw: RawStore, mv: Any, calls: int, warmup: int, runs: int
) -> Comparison:
    """snapshot or rollback (to the snapshot "base" saved after filling) at each size."""
    cands = []
    for size in SIZES:
        name, group = str(size), f"{size:,} messages"
        session = mv.session(name)
        if op == "snapshot":
            raw_call = lambda i, name=name: raw.snapshot(name, f"s{i}")  # noqa: E731
            mv_call = lambda i, s=session: s.snapshot(f"s{i}")  # noqa: E731
        else:
            raw_call = lambda i, name=name: raw.rollback(  # noqa: E731
                name, "base", f"auto:pre-rollback@{i}"
            )
            mv_call = lambda i, s=session: s.rollback("base")  # noqa: E731
        cands += [Candidate(raw_name, raw_call, group), Candidate(MEMVAULT, mv_call, group)]
    return compare(
        op, cands, baseline=raw_name, calls=calls, warmup=warmup, runs=runs, between_runs=progress
    )


Bench = Callable[[], "Comparison | dict[str, Comparison]"]


def shared_benches(
    raw_name: str,
    raw: RawStore,
    mv: Any,
    args: argparse.Namespace,
    history_peers: Callable[[str, str], list[Candidate]],
    langchain: str,
    langchain_read: Callable[[str], object],
) -> dict[str, Bench]:
    """The comparisons every backend runs beside its append: "history", "langchain"
    (``langchain_read(session)`` reads all of a session), "snapshot" and "rollback"."""
    calls, warmup, runs = args.calls, args.warmup, args.runs
    return {
        "history": lambda: history_comparison(
            raw_name, raw, mv, history_peers, calls, warmup, runs
        ),
        "langchain": lambda: {
            f"langchain-{size}": reads_all_comparison(
                raw_name,
                raw,
                mv,
                size,
                langchain,
                lambda size=size: langchain_read(str(size)),
                args.langchain_calls,
                runs,
            )
            for size in SIZES
        },
        **{
            op: lambda op=op: pointer_comparison(op, raw_name, raw, mv, calls, warmup, runs)
            for op in ("snapshot", "rollback")
        },
    }


def no_peers(session: str, group: str) -> list[Candidate]:
    return []


# -- targets -------------------------------------------------------------------------
def at_most(
    label: str, cmp: Comparison, a: tuple[str, str], b: tuple[str, str], limit: float
) -> str:
    """A target "a's p50 <= limit x b's", with the figure."""
    r = cmp.ratio(a, b)
    return (
        f"- {label}: {verdict(r.median <= limit)} — {r} "
        f"({cmp[a].p50 * 1e6:,.0f} µs vs {cmp[b].p50 * 1e6:,.0f} µs)"
    )


def at_least_faster(
    label: str, cmp: Comparison, mine: tuple[str, str], peer: tuple[str, str], factor: float
) -> str:
    """A target "mine is >= factor x faster than peer" (peer's p50 over mine's)."""
    r = cmp.ratio(peer, mine)
    return (
        f"- {label}: {verdict(r.median >= factor)} — {r} "
        f"({cmp[peer].p50 * 1e6:,.0f} µs vs {cmp[mine].p50 * 1e6:,.0f} µs)"
    )


def flat_with_size(label: str, cmp: Comparison, raw_name: str) -> str:
    """memvault at 10,000 messages within 1.3x of at 100 (raw's own ratio beside)."""
    r = cmp.ratio((BIG, MEMVAULT), (SMALL, MEMVAULT))
    raw = cmp.ratio((BIG, raw_name), (SMALL, raw_name))
    return (
        f"- {label} at {BIG} within 1.3x of at {SMALL}: {verdict(r.median <= 1.3)} — "
        f"{r} ({raw_name}: {raw})"
    )


def pointer_targets(cmps: dict[str, Comparison], raw_name: str) -> list[str]:
    return [flat_with_size(op, cmps[op], raw_name) for op in ("snapshot", "rollback") if op in cmps]


# -- command line and report ---------------------------------------------------------
def arguments(doc: str, only: Sequence[str]) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="timed calls per candidate and run")
    ap.add_argument("--warmup", type=int, default=200, help="untimed calls per candidate first")
    ap.add_argument("--runs", type=int, default=3, help="repetitions of each comparison")
    ap.add_argument(
        "--langchain-calls",
        type=int,
        default=20,
        help="timed calls of langchain's history (it reads all 10,000 messages)",
    )
    ap.add_argument(
        "--only",
        nargs="*",
        default=list(only),
        choices=list(only),
        help="the comparisons to run, in this order (default: all)",
    )
    ap.add_argument("--out", default=None, help="write the Markdown report there too")
    ap.add_argument(
        "--json",
        default=None,
        help="write every candidate's per-run p50s there (benchmarks/run.py's summary)",
    )
    return ap


def run(only: Sequence[str], benches: dict[str, Bench]) -> dict[str, Comparison]:
    """Run the comparisons named in ``only``, in that order; a bench may give several."""
    cmps: dict[str, Comparison] = {}
    for name in only:
        print(f"{name} ", end="", file=sys.stderr, flush=True)
        got = benches[name]()
        cmps.update(got if isinstance(got, dict) else {name: got})
        print(file=sys.stderr)
    return cmps


def machine(packages: Sequence[str], *more: str) -> list[str]:
    versions = ", ".join(f"{p} {metadata.version(p)}" for p in ("memvault", *packages))
    return [
        f"- nproc: {os.cpu_count()}; load average at start: {load()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}",
        *more,
        f"- {versions}",
    ]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(
    args: argparse.Namespace,
    facts: list[str],
    sections: list[str],
    cmps: dict[str, Comparison],
    targets: list[str],
) -> None:
    """Print the Markdown report (and write it to ``--out``)."""
    text = "\n".join(
        [
            "### Command",
            "",
            "```",
            " ".join(["python", *sys.argv]),
            "```",
            "",
            "### Machine",
            "",
            *facts,
            f"- load average at end: {load()}",
            "",
            *sections,
            f"### Medians ({args.runs} runs; calls per candidate and run: {args.calls}, langchain "
            f"history {args.langchain_calls}; ratio range = lowest-highest per-run ratio)",
            "",
            markdown_table(list(cmps.values())),
            "### Targets",
            "",
            *targets,
            "",
        ]
    )
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(figures(cmps), indent=1), encoding="utf-8")


def figures(cmps: dict[str, Comparison]) -> list[dict[str, Any]]:
    """Every candidate of every comparison: its comparison's key and title, group, name,
    the baseline's name and the p50 of each run (seconds), for ratios taken run by run."""
    return [
        {
            "comparison": key,
            "title": cmp.title,
            "group": group,
            "name": name,
            "baseline": cmp.baseline,
            "run_p50s": result.run_p50s(),
        }
        for key, cmp in cmps.items()
        for (group, name), result in cmp.results.items()
    ]
