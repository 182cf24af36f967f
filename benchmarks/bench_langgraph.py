"""MemvaultSaver against LangGraph's own savers: one step's put + get_tuple, and bytes.

Install and run from the repository root (PostgreSQL at ``--pg``):

    pip install -e ".[bench,dev]"
    python benchmarks/bench_langgraph.py --calls 200 --warmup 30 --runs 3

What is timed: one graph step as a checkpointer sees it, on a thread that an echo
graph over ``MessagesState`` (one human and one AI message a turn) has brought to
10 messages (5 turns) or 1,000 messages (500 turns): ``get_tuple`` of the thread's
newest checkpoint, then ``put`` of its child holding one more message. Every call
puts a child of the same checkpoint, so the thread stays the same size through the
run (siblings, as a fork makes). Candidates: SQLite, memvault (``sqlite:///``) vs
langgraph-checkpoint-sqlite's ``SqliteSaver``; PostgreSQL, memvault
(``postgresql://``, schema per run) vs langgraph-checkpoint-postgres's
``PostgresSaver`` (its own schema per run), all through their sync API, alternately
call by call after a warm-up (``harness.py``). At 1,000 messages on SQLite, the
per-message work a step cannot avoid runs alone in the same alternation (``part:``
rows): copying the messages out and comparing a child's with them (MemvaultSaver),
serde both ways (what the LangGraph savers do per step).

Stored bytes: the echo graph runs 500 turns on each saver; every 50 turns the
store's size is taken (SQLite: the file after ``VACUUM INTO``, so free pages do not
count; PostgreSQL: ``pg_total_relation_size`` of the schema's tables, indexes and
TOAST included) and plotted to ``benchmarks/langgraph_bytes.png``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg
from harness import Candidate, Comparison, compare, markdown_table
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from memvault.integrations._langgraph_log import _extends
from memvault.integrations._langgraph_values import fresh
from memvault.integrations.langgraph import MemvaultSaver

HERE = Path(__file__).resolve().parent


def echo_graph(saver: Any) -> Any:
    def echo(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("echo", echo)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=saver)


WORDS = (
    "agent memory thread state graph node tool call reply user question answer "
    "weather paris rome city sunny rain plan step check write read store chain"
).split()


def text(n: int) -> str:
    """About 200 characters of words that vary from turn to turn (not one repeated
    word, which PostgreSQL's TOAST compression would shrink to nothing)."""
    rng = random.Random(n)
    return f"turn {n}: " + " ".join(rng.choice(WORDS) for _ in range(32))


def turn(graph: Any, cfg: Any, n: int) -> None:
    graph.invoke({"messages": [HumanMessage(text(n))]}, cfg)


def step(saver: Any, thread: str) -> Callable[[int], object]:
    """One step on ``thread``: get_tuple of its newest checkpoint, put of a child."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    base = latest.config

    def call(i: int) -> object:
        tup = saver.get_tuple(base)
        cp = dict(tup.checkpoint)
        cp["id"] = str(uuid6(clock_seq=i))
        cp["channel_values"] = {
            **cp["channel_values"],
            "messages": [*cp["channel_values"]["messages"], HumanMessage(f"step {i}", id=f"s{i}")],
        }
        versions = dict(cp["channel_versions"])
        versions["messages"] = saver.get_next_version(versions["messages"], None)
        cp["channel_versions"] = versions
        return saver.put(
            base,
            cp,
            {"source": "loop", "step": 10_000 + i, "parents": {}},
            {"messages": versions["messages"]},
        )

    return call


def parts(saver: Any, thread: str) -> list[Candidate]:
    """What a step must do per message whatever the storage, timed alone on the
    thread's ``messages``: MemvaultSaver's floor (copy them out for ``get_tuple``, compare
    the child's with them at ``put``) and the LangGraph savers' (serde both ways)."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    messages = latest.checkpoint["channel_values"]["messages"]
    child = [*fresh(messages), HumanMessage("one more", id="one-more")]
    serde = saver.serde
    return [
        Candidate("part: copy the messages out (memvault get_tuple)", lambda i: fresh(messages)),
        Candidate(
            "part: compare a child's with them (memvault put)", lambda i: _extends(messages, child)
        ),
        Candidate(
            "part: serde dumps + loads of them (LangGraph savers)",
            lambda i: serde.loads_typed(serde.dumps_typed(child)),
        ),
    ]


def sqlite_size(db: Path) -> int:
    out = db.with_suffix(".vacuumed")
    out.unlink(missing_ok=True)
    conn = sqlite3.connect(db)
    conn.execute("VACUUM INTO ?", (str(out),))
    conn.close()
    return out.stat().st_size


def pg_size(server: str, schema: str) -> int:
    with psycopg.connect(server) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def with_path(server: str, schema: str) -> str:
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options=-csearch_path%3D{schema}"


class Savers:
    """The four savers, each on a fresh store, opened in ``stack``."""

    def __init__(self, stack: ExitStack, tmp: Path, server: str, tag: str) -> None:
        self.server = server
        self.schemas = [f"mv_bench_lg_{tag}_{os.getpid()}", f"lg_bench_lg_{tag}_{os.getpid()}"]
        with psycopg.connect(server, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f'CREATE SCHEMA "{schema}"')
        stack.callback(self.drop)
        self.mv_db, self.lg_db = tmp / f"mv-{tag}.db", tmp / f"lg-{tag}.db"
        self.savers: dict[str, Any] = {
            "memvault sqlite": stack.enter_context(
                MemvaultSaver.from_conn_string(f"sqlite:///{self.mv_db}")
            ),
            "SqliteSaver": stack.enter_context(SqliteSaver.from_conn_string(str(self.lg_db))),
            "memvault postgresql": stack.enter_context(
                MemvaultSaver.from_conn_string(
                    f"{server}{'&' if '?' in server else '?'}schema={self.schemas[0]}"
                )
            ),
            "PostgresSaver": stack.enter_context(
                PostgresSaver.from_conn_string(with_path(server, self.schemas[1]))
            ),
        }
        self.savers["SqliteSaver"].setup()
        self.savers["PostgresSaver"].setup()

    def drop(self) -> None:
        with psycopg.connect(self.server, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def size(self, name: str) -> int:
        if name == "memvault sqlite":
            return sqlite_size(self.mv_db)
        if name == "SqliteSaver":
            return sqlite_size(self.lg_db)
        return pg_size(self.server, self.schemas[0 if name.startswith("memvault") else 1])


def steps(args: argparse.Namespace, tmp: Path) -> list[Comparison]:
    comparisons = []
    with ExitStack() as stack:
        savers = Savers(stack, tmp, args.pg, "steps").savers
        for turns in (5, 500):
            thread = f"t{turns}"
            for saver in savers.values():
                graph, cfg = echo_graph(saver), {"configurable": {"thread_id": thread}}
                for n in range(turns):
                    turn(graph, cfg, n)
            for engine, (mine, theirs) in {
                "SQLite": ("memvault sqlite", "SqliteSaver"),
                "PostgreSQL": ("memvault postgresql", "PostgresSaver"),
            }.items():
                extra = parts(savers[theirs], thread) if turns > 5 and engine == "SQLite" else []
                comparisons.append(
                    compare(
                        f"put + get_tuple, {engine}, {2 * turns} messages",
                        [
                            Candidate(theirs, step(savers[theirs], thread)),
                            Candidate(mine, step(savers[mine], thread)),
                            *extra,
                        ],
                        baseline=theirs,
                        calls=args.calls,
                        warmup=args.warmup,
                        runs=args.runs,
                    )
                )
                print(f"done: {comparisons[-1].title}", flush=True)
    return comparisons


def growth(args: argparse.Namespace, tmp: Path) -> dict[str, list[tuple[int, int, float]]]:
    """(turns, bytes, seconds so far) every ``--every`` turns, per saver, run alternately."""
    points: dict[str, list[tuple[int, int, float]]] = {}
    with ExitStack() as stack:
        store = Savers(stack, tmp, args.pg, "bytes")
        graphs = {name: echo_graph(s) for name, s in store.savers.items()}
        spent = dict.fromkeys(graphs, 0.0)
        cfg = {"configurable": {"thread_id": "long"}}
        for name in graphs:
            points[name] = [(0, store.size(name), 0.0)]
        for n in range(1, args.turns + 1):
            for name, graph in graphs.items():
                start = time.perf_counter()
                turn(graph, cfg, n)
                spent[name] += time.perf_counter() - start
            if n % args.every == 0:
                for name in graphs:
                    points[name].append((n, store.size(name), spent[name]))
                print(f"turn {n}", flush=True)
    return points


def plot(points: dict[str, list[tuple[int, int, float]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, series in points.items():
        ax.plot(
            [p[0] for p in series],
            [p[1] / 1e6 for p in series],
            marker="o",
            markersize=3,
            label=name,
        )
    ax.set_xlabel("turns (one human + one AI message each)")
    ax.set_ylabel("stored MB")
    ax.set_title("LangGraph thread storage: echo graph over MessagesState")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "MEMVAULT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--skip-bytes", action="store_true")
    args = parser.parse_args()
    print(
        f"#### Command\n\n`python benchmarks/bench_langgraph.py --calls {args.calls} "
        f"--warmup {args.warmup} --runs {args.runs} --turns {args.turns}`\n"
    )
    print(
        f"#### Machine\n\n{platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start\n",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        comparisons = steps(args, Path(tmp))
        print(
            f"\n#### put + get_tuple of one step (median of {args.runs} runs; "
            f"{args.calls} calls per candidate and run)\n"
        )
        print(markdown_table(comparisons))
        if not args.skip_bytes:
            points = growth(args, Path(tmp))
            out = HERE / "langgraph_bytes.png"
            plot(points, out)
            print(f"\n#### Stored bytes (plot: {out.name}) and graph time, {args.turns} turns\n")
            print(
                "| saver | "
                + " | ".join(f"{t} turns" for t, _, _ in points[next(iter(points))])
                + " | seconds for all turns |"
            )
            print("|---|" + "---:|" * (len(points[next(iter(points))]) + 1))
            for name, series in points.items():
                print(
                    f"| {name} | "
                    + " | ".join(f"{b / 1e6:.2f} MB" for _, b, _ in series)
                    + f" | {series[-1][2]:.1f} |"
                )
        print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
