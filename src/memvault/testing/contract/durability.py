"""Durability across close and reopen (invariant 1)."""

from __future__ import annotations

from typing import Any

from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, users


class DurabilityContract(ContractBase):
    def test_everything_survives_reopen(self, opener: Any) -> None:
        """History, snapshots, versions and the log read the same from a new
        connection after close. Failing: writes acknowledged before they were
        committed, or state held only in the client."""
        self.require("persistent")
        first = opener()
        s = first.session("s")
        s.append(users(3))
        s.snapshot("cp")
        s.pop()
        s.append([Message.user("é👍\x00")])
        state = (s.history(), s.snapshots(), s.log(), s.info())
        first.close()
        second = opener()
        try:
            t = second.session("s")
            assert (t.history(), t.snapshots(), t.log(), t.info()) == state
            t.rollback("cp")
            assert len(t.history()) == 3
        finally:
            second.close()

    def test_acknowledged_append_is_visible_to_another_handle(self, opener: Any) -> None:
        """Invariant 1: once append returns, a read through another connection sees it,
        at once, with no read or close on the writer's side first. Failing: the backend
        acknowledges writes before committing them (a buffer, a write-behind cache, an
        unflushed pipeline): a crash would lose acknowledged turns."""
        self.require("persistent")
        writer, reader = opener(), opener()
        try:
            sent = users(3)
            writer.session("s").append(sent[:2])
            assert reader.session("s").history() == sent[:2]
            writer.session("s").append(sent[2:])
            assert reader.session("s").history() == sent
            assert reader.session("s").info().version == 2
        finally:
            writer.close()
            reader.close()
