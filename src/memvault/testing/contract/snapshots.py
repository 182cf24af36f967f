"""Snapshots and rollback (invariant 4)."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import InvalidMessageError, SnapshotExistsError, SnapshotNotFoundError
from memvault.testing.contract.base import ContractBase, texts, users


class SnapshotsContract(ContractBase):
    def test_snapshot_keeps_version_but_is_logged(self, store: Any) -> None:
        """A snapshot changes no history: same version, one 'snapshot' event.
        Failing: snapshot bumps the version or logs nothing.
        """
        s = store.session("s")
        s.append(users(2))
        snap = s.snapshot("cp")
        assert (snap.name, snap.version, snap.length, snap.auto) == ("cp", 1, 2, False)
        assert s.info().version == 1
        assert s.log()[-1].op == "snapshot" and s.log()[-1].detail["name"] == "cp"

    def test_snapshot_names_are_never_reused(self, store: Any) -> None:
        """A taken name raises SnapshotExistsError; the first snapshot is unchanged.
        Failing: snapshots are overwritten (an upsert where an insert belongs).
        """
        s = store.session("s")
        s.append(users(1))
        s.snapshot("cp")
        s.append(users(1, "x"))
        with pytest.raises(SnapshotExistsError):
            s.snapshot("cp")
        assert s.snapshots()[0].length == 1

    def test_auto_prefix_is_reserved(self, store: Any) -> None:
        """Users cannot make ``auto:`` snapshots; nothing is written.
        Failing: the reserved-name check was bypassed.
        """
        s = store.session("s")
        with pytest.raises(InvalidMessageError):
            s.snapshot("auto:mine")
        assert s.info() is None

    def test_rollback_restores_and_keeps_every_snapshot(self, store: Any) -> None:
        """Invariant 4: rollback restores the snapshot, auto-saves the replaced state,
        deletes or changes no snapshot, bumps the version. Failing: the bug where a
        rollback wiped the snapshots table."""
        s = store.session("s")
        s.append(users(2))
        s.snapshot("one")
        s.append(users(1, "bad"))
        s.snapshot("two")
        before = s.snapshots()
        saved = s.rollback("one")
        assert texts(s.history()) == ["m0", "m1"]
        assert saved.auto and saved.name == "auto:pre-rollback@v2" and saved.length == 3
        after = s.snapshots()
        assert after[: len(before)] == before and after[-1] == saved
        assert s.info().version == 3
        s.rollback("two")
        assert texts(s.history()) == ["m0", "m1", "bad0"]
        s.trim(keep_last=1)  # the auto-saved length counts what was visible
        assert s.rollback("one").length == 1

    def test_rollback_is_undoable(self, store: Any) -> None:
        """Rolling back to the auto-saved snapshot undoes a rollback.
        Failing: the auto-saved snapshot does not hold the replaced state.
        """
        s = store.session("s")
        s.append(users(1))
        s.snapshot("cp")
        s.append(users(2, "x"))
        saved = s.rollback("cp")
        s.rollback(saved.name)
        assert texts(s.history()) == ["m0", "x0", "x1"]

    def test_rollback_of_a_trimmed_session_is_undoable(self, store: Any) -> None:
        """The snapshot a rollback saves of a trimmed session stores its visible
        length (the one it answers and lists), and rolling back to it undoes the
        rollback. Failing: PostgreSQL stored depth + base as that length and answered
        depth - base (a mutant survived the suite).
        """
        s = store.session("s")
        s.append(users(4))
        s.trim(keep_last=2)
        s.snapshot("cp")
        s.append(users(1, "x"))
        saved = s.rollback("cp")
        assert saved.length == {n.name: n.length for n in s.snapshots()}[saved.name] == 3
        s.rollback(saved.name)
        assert texts(s.history()) == ["m2", "m3", "x0"]

    def test_rollback_to_missing_snapshot(self, store: Any) -> None:
        """A missing snapshot raises SnapshotNotFoundError and changes nothing.
        Failing: rollback changes the session before finding the snapshot.
        """
        s = store.session("s")
        s.append(users(1))
        with pytest.raises(SnapshotNotFoundError):
            s.rollback("nope")
        assert s.info().version == 1 and s.snapshots() == []

    def test_snapshot_survives_trim_clear_and_pop(self, store: Any) -> None:
        """Hiding messages never touches what a snapshot holds.
        Failing: hiding messages deletes nodes a snapshot still reaches.
        """
        s = store.session("s")
        s.append(users(4))
        s.snapshot("full")
        s.trim(keep_last=1)
        s.pop()
        s.clear()
        s.rollback("full")
        assert texts(s.history()) == ["m0", "m1", "m2", "m3"]

    def test_snapshot_of_trimmed_history(self, store: Any) -> None:
        """A snapshot keeps the trim floor it saw; the one snapshot() returns is the
        one snapshots() lists, field for field (length: the visible messages).
        Failing: the snapshot does not store the base (trim floor); PostgreSQL's
        snapshot returned a length of depth + base, or stored it as auto (mutants
        survived the suite).
        """
        s = store.session("s")
        s.append(users(4))
        s.trim(keep_last=2)
        snap = s.snapshot("short")
        assert (snap.name, snap.version, snap.length, snap.auto) == ("short", 2, 2, False)
        assert s.snapshots() == [snap]
        s.append(users(1, "x"))
        s.rollback("short")
        assert texts(s.history()) == ["m2", "m3"]
