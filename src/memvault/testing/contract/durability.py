"""Durability across close and reopen (invariant 1)."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import BackendUnavailableError
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

    def test_a_closed_store_refuses_every_call(self, opener: Any) -> None:
        """After ``close()`` every call raises ``BackendUnavailableError`` ("the store
        is closed") and writes nothing, on a handle made before the close too; a
        second close does nothing. Failing: a store that goes on working after close
        (Redis reconnected, memory kept serving) where another backend refuses: code
        that runs on one backend breaks on the next."""
        store = opener()
        kept = store.session("s")
        kept.append(users(2))
        kept.snapshot("cp")
        if self.face == "async":  # the proxy's own close also stops its event loop
            store.run(store.target.close())
        else:
            store.close()
        calls = {
            "append": lambda: kept.append(users(1)),
            "history": kept.history,
            "info": kept.info,
            "log": kept.log,
            "snapshots": kept.snapshots,
            "pop": kept.pop,
            "snapshot": lambda: kept.snapshot("later"),
            "rollback": lambda: kept.rollback("cp"),
            "a new handle's append": lambda: store.session("new").append(users(1)),
            "sessions": store.sessions,
        }
        for name, call in calls.items():
            with pytest.raises(BackendUnavailableError, match="closed"):
                call()
                pytest.fail(f"{name} worked on a closed store")
        store.close()
        if "persistent" in self.capabilities:
            again = opener()
            try:
                assert len(again.session("s").history()) == 2
                assert again.sessions() == ["s"]
            finally:
                again.close()
