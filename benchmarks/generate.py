"""Build a big memvault store: by default 1,000,000 messages in 100,000 sessions.

Run from the repository root::

    python benchmarks/generate.py sqlite:////tmp/big.db?durability=normal
    python benchmarks/generate.py "redis://127.0.0.1:6379/7?prefix=big" --processes 2
    python benchmarks/generate.py "postgresql://postgres@127.0.0.1:5432/test?schema=big"
    python benchmarks/generate.py URL --sessions 1000 --messages 10000    # smaller

The store is written through memvault's public API only (``Session.append``, one call
per session holding all of its messages), so it is a genuine store: every session has
its nodes, its session row and its append event, exactly as users' appends leave them.
Sessions are named ``big-000000``, ``big-000001``, ...; each gets ``messages /
sessions`` messages (a user turn, then an assistant turn, alternately: the texts of
``common.turn_texts``, ~140 and ~570 characters). The work is split into chunks of
sessions handed to ``--processes`` worker processes, each with its own store handle.

Message ids are derived from the session and position (``big-000042/7``), so running the
same command again (say after Ctrl-C) appends only what is missing: an append whose ids
are all stored is a no-op. ``--verify N`` then reads N sessions spread over the store
back and checks their length, ids, texts and event log.

Also importable: :func:`generate` (used by ``bench_bigstore.py``; other benchmarks may
build their big stores with it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import turn_texts

import memvault
from memvault import Message

CHUNK = 500
"""Sessions per task handed to a worker process."""

_store: memvault.Store | None = None


def session_id(index: int) -> str:
    return f"big-{index:06d}"


def messages_of(index: int, count: int) -> list[Message]:
    """The ``count`` messages of session ``index``, oldest first, with stable ids."""
    out = []
    for k in range(count):
        user, assistant = turn_texts(k // 2)
        role, text = ("user", user) if k % 2 == 0 else ("assistant", assistant)
        out.append(Message(id=f"{session_id(index)}/{k}", role=role, content=text))
    return out


def _open(url: str, options: dict[str, Any]) -> memvault.Store:
    global _store
    if _store is None:
        _store = memvault.open(url, **options)
    return _store


def _fill(url: str, options: dict[str, Any], start: int, stop: int, per_session: int) -> int:
    """Append every message of sessions ``start``..``stop-1``; the messages written."""
    store = _open(url, options)
    for index in range(start, stop):
        batch = messages_of(index, per_session)
        session = store.session(session_id(index))
        for at in range(0, len(batch), 1000):  # memvault's batch limit
            session.append(batch[at : at + 1000])
    return (stop - start) * per_session


@dataclass(frozen=True)
class Generated:
    sessions: int
    messages: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"{self.messages:,} messages in {self.sessions:,} sessions in "
            f"{self.seconds:.0f} s ({self.messages / self.seconds:,.0f} messages/s)"
        )


def chunks(first: int, sessions: int) -> Iterator[tuple[int, int]]:
    for start in range(first, sessions, CHUNK):
        yield start, min(start + CHUNK, sessions)


def generate(
    url: str,
    sessions: int = 100_000,
    messages: int = 1_000_000,
    processes: int = 2,
    progress: bool = True,
    first: int = 0,
    **options: Any,
) -> Generated:
    """Fill the store at ``url`` (see the module's docstring): sessions ``first`` to
    ``sessions - 1`` (so a store can be grown in steps), ``messages / sessions`` each;
    ``options`` go to ``memvault.open``. Progress lines go to stderr every 5%."""
    if sessions < 1 or messages % sessions:
        raise SystemExit("--messages must be a positive multiple of --sessions")
    per_session = messages // sessions
    todo = (sessions - first) * per_session
    start = time.monotonic()
    done = 0
    shown = 0
    with ProcessPoolExecutor(max_workers=processes) as pool:
        futures = [
            pool.submit(_fill, url, options, a, b, per_session) for a, b in chunks(first, sessions)
        ]
        for future in as_completed(futures):
            done += future.result()
            if progress and done * 20 // todo > shown:
                shown = done * 20 // todo
                print(
                    f"generate: {done:,}/{todo:,} messages, {time.monotonic() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return Generated(sessions - first, todo, time.monotonic() - start)


def verify(url: str, sessions: int, messages: int, samples: int) -> list[str]:
    """Read ``samples`` sessions spread over the store; what differs from what
    :func:`generate` writes (empty if nothing)."""
    per_session = messages // sessions
    problems = []
    with memvault.open(url) as store:
        for index in sorted({i * sessions // samples for i in range(samples)} | {sessions - 1}):
            s = store.session(session_id(index))
            want = messages_of(index, per_session)
            got = s.history()
            if [(m.id, m.role, m.content) for m in got] != [
                (m.id, m.role, m.content) for m in want
            ]:
                problems.append(f"{session_id(index)}: history differs ({len(got)} messages)")
            log = s.log()
            appends = (per_session + 999) // 1000
            if [e.op for e in log] != ["append"] * appends:
                problems.append(f"{session_id(index)}: event log {[e.op for e in log]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", help="the store (options in its query, e.g. ?durability=normal)")
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    ap.add_argument(
        "--verify",
        type=int,
        default=100,
        metavar="N",
        help="sessions read back afterwards (0: none)",
    )
    args = ap.parse_args(argv)
    made = generate(args.url, args.sessions, args.messages, args.processes)
    print(
        f"{memvault.urls.redact(args.url)}: {made}, "
        f"{args.processes} processes, load average {os.getloadavg()[0]:.1f}"
    )
    if args.verify:
        problems = verify(args.url, args.sessions, args.messages, args.verify)
        print(
            f"verified {args.verify} sessions: " + ("ok" if not problems else "; ".join(problems))
        )
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
