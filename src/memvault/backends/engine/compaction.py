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
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from memvault.errors import broken_chain
from memvault.model import (
    COMPACT_STEP_NODES,
    CompactProgress,
    CompactStats,
    Event,
    Progress,
    Snapshot,
    check_snapshot,
)


class _Row(Protocol):
    """What compact reads of :class:`~memvault.backends.engine.core.Row` (the engine
    imports this module, so it is named by shape here)."""

    key: int | str
    name: str
    created_at: float
    head: int
    base: int
    next_node: int
    summary: int

    def live(self, now: float) -> bool: ...


R = TypeVar("R", bound=_Row)


class _Txn(Protocol[R]):
    """The :class:`~memvault.backends.engine.core.Txn` primitives compact uses."""

    def rows(self) -> list[R]: ...
    def load(self, name: str) -> R | None: ...
    def purge(self, row: R) -> int: ...
    def drop_events(self, row: R, keep_last: int) -> int: ...
    def snapshots(self, row: R) -> list[Snapshot]: ...
    def events(self, row: R) -> list[Event]: ...
    def links(self, row: R) -> dict[int, tuple[int, int]]: ...
    def delete_nodes(self, row: R, nodes: Sequence[int]) -> None: ...


def compact(
    transaction: Callable[[bool], contextlib.AbstractContextManager[_Txn[R]]],
    keep_events: int | None,
    now: float,
    batch: int,
    progress: Progress | None,
) -> CompactStats:
    """Compact every session stored when it begins, ``batch`` sessions a step:
    each step plans in one read transaction, then deletes what it found in one write
    transaction (none if it found nothing), so writers wait only for the deletes.
    ``progress`` after each step. Sessions created meanwhile are new: nothing to do.

    Raises:
        CorruptRecordError: a session's chain is broken, or one of its snapshots
            cannot be right (its step is rolled back).
    """
    with transaction(False) as txn:
        names = [row.name for row in txn.rows()]
    stats, done = CompactStats(), 0
    while done < len(names):
        with transaction(False) as txn:  # the plan: reads, so no writer waits for it
            plans, took, budget = [], 0, COMPACT_STEP_NODES
            for name in names[done : done + batch]:
                if took and budget <= 0:
                    break
                took += 1
                row = txn.load(name)  # None: deleted since
                if row is not None:
                    budget -= row.next_node - 1
                    plans.append(_plan(txn, row, keep_events, now))
        step = CompactStats()
        if any(plans):
            with transaction(True) as txn:  # the deletes, checked against what changed
                for plan in plans:
                    if plan:
                        step += _apply(txn, plan, keep_events, now)
        stats, done = stats + step, done + took
        if progress is not None:
            progress(CompactProgress(done, len(names), stats))
    return stats


@dataclass(frozen=True)
class _Plan(Generic[R]):
    """What compact found to delete in one session: all of it (``expired``), or the
    events beyond the kept ones and the nodes nothing reaches (``dead``)."""

    row: R
    expired: bool
    events: int
    dead: list[int]

    def __bool__(self) -> bool:
        return self.expired or self.events > 0 or bool(self.dead)


def _plan(txn: _Txn[R], row: R, keep_events: int | None, now: float) -> _Plan[R]:
    """The session's plan, read in one consistent view.

    Raises:
        CorruptRecordError: a chain is broken, or a snapshot's pointers cannot be
            right (then nothing of it is deleted: what it should reach is unknown).
    """
    if not row.live(now):
        return _Plan(row, True, 0, [])
    events = txn.events(row)
    drop = max(0, len(events) - keep_events) if keep_events is not None else 0
    snaps = [check_snapshot(row.name, s, row.next_node) for s in txn.snapshots(row)]
    pointers = [(row.head, row.base)] + [(s.head, s.base) for s in snaps]
    for e in events[drop:]:
        pointers += [(e.head_before, e.base_before), (e.head_after, e.base_after)]
    summaries = [row.summary] + [s.summary for s in snaps]
    links = txn.links(row)
    dead = set(links) - _reachable(row.name, links, pointers) - _summaries(links, summaries)
    return _Plan(row, False, drop, sorted(dead))


def _apply(txn: _Txn[R], plan: _Plan[R], keep_events: int | None, now: float) -> CompactStats:
    """Carry ``plan`` out, if it still holds. What was garbage stays garbage whatever
    a writer did since (new pointers only ever point at what a head, a snapshot or a
    new node reaches), and the newest events kept now are newer than those the plan
    kept; only a session deleted or started afresh since, or revived before it was
    purged, is left alone (the next compact sees it anew)."""
    row = txn.load(plan.row.name)
    if row is None or (row.key, row.created_at) != (plan.row.key, plan.row.created_at):
        return CompactStats()
    if plan.expired:
        return (
            CompactStats(nodes=txn.purge(row), sessions=1) if not row.live(now) else CompactStats()
        )
    events = txn.drop_events(row, keep_events) if keep_events is not None else 0
    if plan.dead:
        txn.delete_nodes(row, plan.dead)
    return CompactStats(nodes=len(plan.dead), events=events)


def _reachable(
    session_id: str, links: dict[int, tuple[int, int]], pointers: list[tuple[int, int]]
) -> set[int]:
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
