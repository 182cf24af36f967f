"""Plan the API calls that rebuild a session from its exported targets.

An export lists each user snapshot, then the history, by message ids. A message id
is one node of the session's tree with a fixed parent, so the importer cannot append
a stored message again: it moves between targets by rolling back to states saved
earlier, popping, appending new messages and trimming. :class:`Replay` simulates
the tree and yields the calls (``append``, ``pop``, ``trim``, ``clear``,
``rollback``, ``snapshot``) before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memvault.errors import InvalidMessageError


@dataclass(frozen=True)
class State:
    """A state the importer can return to: a head message and a trim floor."""

    head: str | None
    base: int
    snapshot: str | int | None = None  # a user snapshot's name, or the n-th rollback's


class Replay:
    """Simulates the session's message tree to plan the calls that reach each target.

    Each message id is one node with a fixed parent, so a target whose messages are
    stored already is reached by rolling back to a state saved earlier (a snapshot
    made by this import, or the ``auto:`` one each of its rollbacks leaves), popping
    down to the last shared message, appending the new ones and trimming.
    """

    def __init__(self, session_id: str, targets: list[tuple[str | None, list[str]]]) -> None:
        self.sid = session_id
        self.known: dict[str, str] = {}  # child -> parent, as the targets show them
        for _, ids in targets:
            self.known.update(zip(ids[1:], ids[:-1], strict=True))
        self.parent: dict[str, str | None] = {}  # stored messages
        self.now = State(None, 0)
        self.saved: list[State] = []
        self.rollbacks = 0
        self.calls: list[tuple[str, Any]] = []

    def path(self, head: str | None) -> list[str]:
        chain = []
        while head is not None:
            chain.append(head)
            head = self.parent[head]
        return chain[::-1]

    def _wanted(self, target: list[str]) -> tuple[list[str], bool]:
        """The chain a target needs from the root, and whether its top is fixed."""
        chain = list(target)
        top = chain[0]
        while True:
            if top in self.parent:
                above = self.parent[top]
                if above is None:
                    return chain, True
            elif top in self.known:
                above = self.known[top]
            else:
                return chain, False
            chain.insert(0, above)
            top = above

    def reach(self, target: list[str], later: set[str]) -> None:
        """Plan the calls from the current state to ``target``; ``later`` holds the
        messages later targets show, which must stay reachable."""
        if self.visible(self.now) == target:
            return
        if not target:
            self._keep_now(later, target)
            self.calls.append(("clear", None))
            self.now = State(self.now.head, len(self.path(self.now.head)))
            return
        wanted, rooted = self._wanted(target)
        stored = sum(1 for m in wanted if m in self.parent)
        if any(m in self.parent for m in wanted[stored:]):
            raise self._cannot()
        for state in [self.now, *reversed(self.saved)]:
            chain = self.path(state.head)
            full = wanted if rooted else chain + wanted
            keep = 0
            while keep < min(len(chain), len(full)) and chain[keep] == full[keep]:
                keep += 1
            base = len(full) - len(target)
            if keep >= stored and state.base <= min(keep, base):
                self._go(state, len(chain) - keep, full[keep:], base, (later, target))
                return
        raise self._cannot()

    def _keep_now(self, later: set[str], target: list[str]) -> None:
        """Before a pop, trim or clear hides messages a later target shows, make the
        current state one to come back to: roll back to any saved state (which saves
        this one as ``auto:``), then back to that auto snapshot."""
        if (
            not later.intersection(self.visible(self.now)) - set(target)
            or not self.saved
            or any((s.head, s.base) == (self.now.head, self.now.base) for s in self.saved)
        ):
            return
        self._rollback(self.saved[-1])
        self._rollback(self.saved[-1])  # the auto snapshot the first one left

    def _rollback(self, state: State) -> None:
        self.calls.append(("rollback", state.snapshot))
        self.saved.append(State(self.now.head, self.now.base, self.rollbacks))
        self.rollbacks += 1
        self.now = state

    def _go(
        self, state: State, pops: int, new: list[str], base: int, keep: tuple[set[str], list[str]]
    ) -> None:
        """Roll back to ``state`` (unless current), pop, append ``new``, trim."""
        if state != self.now:
            self._rollback(state)
        head = state.head
        if pops:
            self._keep_now(*keep)
            self.calls.append(("pop", pops))
            for _ in range(pops):
                head = self.parent[head] if head is not None else None
            self.now = State(head, state.base)
        if new:
            self.calls.append(("append", new))
            for m in new:
                self.parent[m], head = head, m
            self.now = State(head, state.base)
        if base != state.base:
            self._keep_now(*keep)
            self.calls.append(("trim", len(self.path(head)) - base))
        self.now = State(head, base)

    def visible(self, state: State) -> list[str]:
        return self.path(state.head)[state.base :]

    def snapshot(self, name: str) -> None:
        self.calls.append(("snapshot", name))
        self.now = State(self.now.head, self.now.base, name)
        self.saved.append(self.now)

    def _cannot(self) -> InvalidMessageError:
        return InvalidMessageError(
            f"cannot import session {self.sid!r}: its snapshots share messages in a way "
            "no sequence of appends, pops, trims and rollbacks rebuilds"
        )


__all__ = ["Replay", "State"]
