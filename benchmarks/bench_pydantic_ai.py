"""MemvaultHistory against the storage pydantic-ai's docs show, and against memvault itself.

Install and run from the repository root (PostgreSQL at ``--pg``):

    pip install -e ".[bench,dev]"
    python benchmarks/bench_pydantic_ai.py --calls 200 --warmup 30 --runs 3

The conversation: 1,000 pydantic-ai messages, 250 turns of a user prompt, a tool
call, its result and an answer (about 200 characters of text each), as an agent
writes them. What is timed, on SQLite (file, WAL, ``synchronous=FULL``: memvault's
default durability) and on PostgreSQL (a schema per run), alternately call by call
after a warm-up (``harness.py``):

- ``save a turn``: storing one turn's 4 new messages (``result.new_messages()``) on
  the 1,000-message conversation. The docs' pattern: ``ModelMessagesTypeAdapter.
  dump_json`` of the whole history (``result.all_messages()``) written over the
  conversation's one row. MemvaultHistory: ``extend(new_messages)``. memvault's own
  ``append``: the very records MemvaultHistory writes, built beforehand.
- ``load``: the whole 1,000-message conversation as ModelMessages. The docs' pattern:
  the row read and ``ModelMessagesTypeAdapter.validate_json``. MemvaultHistory:
  ``load()``. memvault's own ``history()`` of the same records (memvault messages,
  not decoded into pydantic-ai's).
- ``a turn``: what each agent turn does, on a conversation that grows from 1,000
  messages by 4 a call: load it whole, then save the turn (the docs' pattern writes
  the loaded history and the turn back as the row).
- ``load the last 20``: the same, for a run that only sends the recent turns: the
  docs' pattern reads and validates the whole row and slices it; MemvaultHistory
  ``load(last=20)``; memvault ``history(last=20)``.

Ratios are against the docs' pattern (the baseline of each table); the targets
compare MemvaultHistory with it and with memvault's own calls.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
from harness import Candidate, Comparison, compare, markdown_table
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

import memvault
from memvault.integrations._pydantic_ai_codec import key, payload, to_message
from memvault.integrations.pydantic_ai import MemvaultHistory

DOCS, MINE, CORE = "docs' pattern (one JSON row)", "MemvaultHistory", "memvault append/history"
SIZE = 1000
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
WORDS = "agent memory tool call reply user question answer weather city plan".split()


def text(n: int) -> str:
    return f"turn {n}: " + " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(30))


def turn(n: int) -> list[ModelMessage]:
    """One turn of 4 messages, as an agent with a tool writes them (unique timestamps)."""
    at = START + timedelta(seconds=n)
    run = f"run-{n}"
    call = f"call-{n}"
    return [
        ModelRequest(parts=[UserPromptPart(text(n), timestamp=at)], timestamp=at, run_id=run),
        ModelResponse(
            parts=[ToolCallPart("lookup", {"query": text(n)[:40], "n": n}, tool_call_id=call)],
            usage=RequestUsage(input_tokens=100 + n, output_tokens=20),
            model_name="gpt-5",
            timestamp=at,
            provider_name="openai",
            run_id=run,
        ),
        ModelRequest(
            parts=[ToolReturnPart("lookup", {"found": text(n + 1)}, call, timestamp=at)],
            timestamp=at,
            run_id=run,
        ),
        ModelResponse(
            parts=[TextPart(text(n + 2))],
            usage=RequestUsage(input_tokens=150 + n, output_tokens=60),
            model_name="gpt-5",
            timestamp=at,
            provider_name="openai",
            run_id=run,
        ),
    ]


def conversation() -> list[ModelMessage]:
    return [m for n in range(SIZE // 4) for m in turn(n)]


def records(messages: list[ModelMessage]) -> list[memvault.Message]:
    """The memvault messages MemvaultHistory writes for ``messages`` (no repeats here)."""
    texts = [payload(m, i) for i, m in enumerate(messages)]
    return [to_message(m, t, key(t)) for m, t in zip(messages, texts, strict=True)]


class DocsRow:
    """pydantic-ai's documented storage: the whole history as one JSON row."""

    def __init__(
        self, save: Callable[[str, bytes], None], read: Callable[[str], bytes], row: str = "c"
    ) -> None:
        self._save, self._read, self.row = save, read, row

    def other(self, row: str) -> DocsRow:
        return DocsRow(self._save, self._read, row)

    def save(self, messages: list[ModelMessage]) -> None:
        self._save(self.row, ModelMessagesTypeAdapter.dump_json(messages))

    def load(self) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json(self._read(self.row))


def sqlite_row(path: Path) -> DocsRow:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE conversations (id TEXT PRIMARY KEY, messages BLOB NOT NULL)")

    def save(row: str, blob: bytes) -> None:
        conn.execute(
            "INSERT INTO conversations VALUES (?, ?) "
            "ON CONFLICT (id) DO UPDATE SET messages = excluded.messages",
            (row, blob),
        )

    def read(row: str) -> bytes:
        return bytes(
            conn.execute("SELECT messages FROM conversations WHERE id = ?", (row,)).fetchone()[0]
        )

    return DocsRow(save, read)


def postgres_row(server: str, schema: str, stack: ExitStack) -> DocsRow:
    conn = stack.enter_context(psycopg.connect(server, autocommit=True))
    conn.execute(f'CREATE TABLE "{schema}".conversations (id text PRIMARY KEY, messages text)')
    table = f'"{schema}".conversations'

    def save(row: str, blob: bytes) -> None:
        conn.execute(
            f"INSERT INTO {table} VALUES (%s, %s) "
            "ON CONFLICT (id) DO UPDATE SET messages = excluded.messages",
            (row, blob.decode()),
        )

    def read(row: str) -> bytes:
        got = conn.execute(f"SELECT messages FROM {table} WHERE id = %s", (row,)).fetchone()
        assert got is not None
        return str(got[0]).encode()

    return DocsRow(save, read)


def comparisons(engine: str, row: DocsRow, store: memvault.Store, args: Any) -> list[Comparison]:
    base = conversation()
    row.save(base)
    history = MemvaultHistory("load", store=store)
    store.session("load").append(records(base))
    assert history.load() == row.load() == base
    saving, turning = MemvaultHistory("save", store=store), MemvaultHistory("turn", store=store)
    core, turning_core = store.session("save-core"), store.session("turn-core")
    turning_row = row.other("turn")
    turning_row.save(base)
    for part in (base[:500], base[500:]):
        for history_ in (saving, turning):
            history_.extend(part)
        for session in (core, turning_core):
            session.append(records(part))
    total = args.warmup + args.calls * args.runs  # the call index runs on through the runs
    # every call saves a turn no call saved before: built before timing starts, as a
    # run's result holds its messages already
    turns = {i: turn(SIZE // 4 + i) for i in range(total)}
    core_turns = {i: records(turns[i]) for i in range(total)}
    docs_histories = {i: [*base, *turns[i]] for i in range(total)}
    common = {"calls": args.calls, "warmup": args.warmup, "runs": args.runs, "baseline": DOCS}
    return [
        compare(
            f"save a turn, {engine}, {SIZE:,} messages",
            [
                Candidate(DOCS, lambda i: row.save(docs_histories[i])),
                Candidate(MINE, lambda i: saving.extend(turns[i])),
                Candidate(CORE, lambda i: core.append(core_turns[i])),
            ],
            **common,
        ),
        compare(
            f"load, {engine}, {SIZE:,} messages",
            [
                Candidate(DOCS, lambda i: row.load()),
                Candidate(MINE, lambda i: history.load()),
                Candidate(CORE, lambda i: history.session.history()),
            ],
            **common,
        ),
        compare(
            f"a turn (load all, save 4), {engine}, from {SIZE:,} messages",
            [
                Candidate(DOCS, lambda i: turning_row.save([*turning_row.load(), *turns[i]])),
                Candidate(MINE, lambda i: (turning.load(), turning.extend(turns[i]))),
                Candidate(
                    CORE, lambda i: (turning_core.history(), turning_core.append(core_turns[i]))
                ),
            ],
            **common,
        ),
        compare(
            f"load the last 20, {engine}, {SIZE:,} messages",
            [
                Candidate(DOCS, lambda i: row.load()[-20:]),
                Candidate(MINE, lambda i: history.load(last=20)),
                Candidate(CORE, lambda i: history.session.history(last=20)),
            ],
            **common,
        ),
    ]


def targets(cmps: list[Comparison]) -> list[str]:
    lines = []
    for cmp in cmps:
        vs_docs, vs_core = cmp.ratio(MINE, DOCS), cmp.ratio(MINE, CORE)
        lines.append(
            f"- {cmp.title}: MemvaultHistory vs the docs' pattern {vs_docs} "
            f"(faster: {'**met**' if vs_docs.median < 1 else '**not met**'}); "
            f"vs memvault's own call {vs_core} "
            f"(within 1.5x: {'**met**' if vs_core.median <= 1.5 else '**not met**'})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--pg",
        default=os.environ.get(
            "MEMVAULT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    print(
        f"#### Command\n\n`python benchmarks/bench_pydantic_ai.py --calls {args.calls} "
        f"--warmup {args.warmup} --runs {args.runs}`\n"
    )
    print(
        f"#### Machine\n\n{platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores (shared with other jobs), load average "
        f"{os.getloadavg()[0]:.1f} at start\n",
        flush=True,
    )
    cmps: list[Comparison] = []
    schema = f"mv_bench_pai_{os.getpid()}"
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        with memvault.open(f"sqlite:///{tmp}/mv.db") as store:
            cmps += comparisons("SQLite", sqlite_row(Path(tmp) / "docs.db"), store, args)
            print("done: SQLite", flush=True)
        with psycopg.connect(args.pg, autocommit=True) as conn:
            for name in (schema, f"{schema}_mv"):
                conn.execute(f'CREATE SCHEMA "{name}"')
        try:
            sep = "&" if "?" in args.pg else "?"
            with memvault.open(f"{args.pg}{sep}schema={schema}_mv") as store:
                cmps += comparisons("PostgreSQL", postgres_row(args.pg, schema, stack), store, args)
            stack.close()
            print("done: PostgreSQL", flush=True)
        finally:
            with psycopg.connect(args.pg, autocommit=True) as conn:
                for name in (schema, f"{schema}_mv"):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    print(
        f"\n#### Medians ({args.runs} runs; {args.calls} calls per candidate and run; "
        "ratio range = lowest-highest per-run ratio)\n"
    )
    print(markdown_table(cmps))
    print("#### Targets\n")
    print("\n".join(targets(cmps)))
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
