"""``compact`` for the backends whose logic runs in Python (memory, SQLite).

It works in steps, each one write transaction over at most ``batch`` whole sessions
(fewer once they held :data:`~memvault.model.COMPACT_STEP_NODES` nodes), so a
writer waits for one short step at most, and a reader between steps sees every
session either untouched or compacted, never half done. A compact interrupted
(even killed) leaves the steps it committed, and the next one finishes the job.
Redis and PostgreSQL do the same server-side (``write.lua``'s ``compact``,
``functions.sql``'s ``compact_step``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from memvault.errors import broken_chain
from memvault.model import (
    COMPACT_STEP_NODES,
    CompactProgress,
    CompactStats,
    Event,
    Progress,
    Snapshot,
)


class _Row(Protocol):
    """What compact reads of :class:`~memvault.backends.engine.Row` (the engine
    imports this module, so it is named by shape here)."""

    name: str
    head: int
    base: int
    next_node: int
    summary: int

    def live(self, now: float) -> bool: ...


R = TypeVar("R", bound=_Row)


class _Txn(Protocol[R]):
    """The :class:`~memvault.backends.engine.Txn` primitives compact uses."""

    def rows(self) -> list[R]: ...
    def load(self, name: str) -> R | None: ...
    def purge(self, row: R) -> int: ...
    def drop_events(self, row: R, keep_last: int) -> int: ...
    def snapshots(self, row: R) -> list[Snapshot]: ...
    def events(self, row: R) -> list[Event]: ...
    def links(self, row: R) -> dict[int, tuple[int, int]]: ...
    def delete_nodes(self, row: R, nodes: Sequence[int]) -> None: ...


def compact(transaction: Callable[[bool], contextlib.AbstractContextManager[_Txn[R]]],
            keep_events: int | None, now: float, batch: int,
            progress: Progress | None) -> CompactStats:
    """Compact every session stored when it begins, ``batch`` sessions a step (each
    in one ``transaction(True)``);
    ``progress`` after each step. Sessions created meanwhile are new: nothing to do.

    Raises:
        CorruptRecordError: a session's chain is broken (its step is rolled back).
    """
    with transaction(False) as txn:
        names = [row.name for row in txn.rows()]
    stats, done = CompactStats(), 0
    while done < len(names):
        with transaction(True) as txn:
            step, took, budget = CompactStats(), 0, COMPACT_STEP_NODES
            for name in names[done:done + batch]:
                if took and budget <= 0:
                    break
                took += 1
                row = txn.load(name)  # None: deleted since
                if row is not None:
                    budget -= row.next_node - 1
                    step += _compact_session(txn, row, keep_events, now)
        stats, done = stats + step, done + took
        if progress is not None:
            progress(CompactProgress(done, len(names), stats))
    return stats


def _compact_session(txn: _Txn[R], row: R, keep_events: int | None, now: float
                     ) -> CompactStats:
    """Purge the session if it expired, else drop its events beyond ``keep_events``
    and the nodes nothing reaches (CorruptRecordError if a chain is broken)."""
    if not row.live(now):
        return CompactStats(nodes=txn.purge(row), sessions=1)
    events = txn.drop_events(row, keep_events) if keep_events is not None else 0
    snaps = txn.snapshots(row)
    pointers = [(row.head, row.base)] + [(s.head, s.base) for s in snaps]
    for e in txn.events(row):
        pointers += [(e.head_before, e.base_before), (e.head_after, e.base_after)]
    summaries = [row.summary] + [s.summary for s in snaps]
    links = txn.links(row)
    dead = set(links) - _reachable(row.name, links, pointers) - _summaries(links, summaries)
    if dead:
        txn.delete_nodes(row, sorted(dead))
    return CompactStats(nodes=len(dead), events=events)


def _reachable(session_id: str, links: dict[int, tuple[int, int]],
               pointers: list[tuple[int, int]]) -> set[int]:
    """Nodes visible from any ``(head, base)`` pointer: the chain above its base.

    Raises:
        CorruptRecordError: a chain is broken (then nothing is deleted: what lies
            below the break may still be wanted).
    """
    keep: set[int] = set()
    for head, base in set(pointers):
        if head not in links:
            continue  # nothing above the base (a cleared head is garbage itself), or none
        node, depth = head, links[head][1]
        while depth > base:
            if node not in links or links[node][1] != depth:
                raise broken_chain(session_id, depth)
            keep.add(node)
            node, depth = links[node][0], depth - 1
    return keep


def _summaries(links: dict[int, tuple[int, int]], pointers: list[int]) -> set[int]:
    """Summary nodes a session or snapshot points at, and the earlier summaries
    behind each (a pop of the summary brings its predecessor back)."""
    keep: set[int] = set()
    for node in pointers:
        while node in links and node not in keep:
            keep.add(node)
            node = links[node][0]
    return keep
