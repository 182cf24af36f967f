"""Idempotent retries and compare-and-set appends (invariants 2, 7 and 8)."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import ConflictError, DuplicateMessageError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, texts, users


class WritesContract(ContractBase):
    def test_retrying_a_stored_batch_is_a_noop(self, store: Any) -> None:
        """Invariant 8: re-appending messages whose ids are all stored returns the
        current version and writes nothing. Failing: a retry after a timeout would
        duplicate turns."""
        s = store.session("s")
        batch = users(2)
        assert s.append(batch) == 1
        s.append(users(1, "later"))
        assert s.append(batch) == 2
        assert texts(s.history()) == ["m0", "m1", "later0"]
        assert len(s.log()) == 2

    def test_retrying_a_large_stored_batch_is_a_noop(self, store: Any) -> None:
        """The same for a batch of 200 messages, and for 200 messages mixing stored and
        new ids (more ids than a backend may bind one by one in a statement).
        Failing: SQLite looked large batches' ids up another way, which a mutant could
        break unseen (a retry would then store the turn twice)."""
        s = store.session("s")
        batch = users(200)
        assert s.append(batch) == 1
        assert s.append(batch) == 1
        assert len(s.history()) == 200 and len(s.log()) == 1
        with pytest.raises(
            DuplicateMessageError, match=r": 1 of 200 message ids are already stored"
        ):
            s.append([*users(199, "new"), batch[150]])
        assert len(s.history()) == 200 and s.info().version == 1

    def test_ids_are_matched_against_hidden_messages_too(self, store: Any) -> None:
        """A popped message's id is still stored: re-appending it is a no-op; a new
        id is needed to add it again.
        Failing: idempotency checks only the visible history.
        """
        s = store.session("s")
        msg = Message.user("hello")
        s.append([msg])
        s.pop()
        version = s.info().version
        assert s.append([msg]) == version
        assert s.history() == []
        s.append([msg.model_copy(update={"id": "fresh"})])
        assert texts(s.history()) == ["hello"]

    def test_mixed_stored_and_new_ids_write_nothing(self, store: Any) -> None:
        """A batch mixing stored and new ids raises DuplicateMessageError, counting the
        stored ones and naming the smallest, and writes none of it.
        Failing: the backend writes the new part of a mixed batch, or names an id that
        is not stored (a new one of the batch) or not in the batch.
        """
        s = store.session("s")
        old = users(1)
        s.append(old)
        with pytest.raises(DuplicateMessageError):
            s.append([*old, Message.user("new")])
        assert texts(s.history()) == ["m0"] and s.info().version == 1
        s.append([Message.user(i, id=i) for i in "bdf"])
        batch = [Message.user(i, id=i) for i in "adbz"]
        with pytest.raises(
            DuplicateMessageError, match=r"2 of 4 message ids are already stored \(e\.g\. 'b'\)"
        ):
            s.append(batch)
        assert texts(s.history()) == ["m0", "b", "d", "f"] and s.info().version == 2

    def test_repeated_id_within_a_batch_is_refused(self, store: Any) -> None:
        """One id twice in one batch raises and writes nothing.
        Failing: duplicates within a batch reach storage.
        """
        s = store.session("s")
        m = Message.user("x")
        with pytest.raises(DuplicateMessageError):
            s.append([m, m])
        assert s.info() is None

    def test_same_id_in_two_sessions_is_independent(self, store: Any) -> None:
        """Idempotency is per session: one message id may live in two sessions.
        Failing: message ids are unique per store instead of per session.
        """
        m = Message.user("shared")
        store.session("a").append([m])
        store.session("b").append([m])
        assert store.session("b").history() == [m]

    def test_expect_version_is_compare_and_set(self, store: Any) -> None:
        """Invariant 7: expect_version that matches appends; one that does not raises
        ConflictError and writes nothing. A new session is at version 0.
        Failing: the version check and the write are not one atomic step.
        """
        s = store.session("s")
        with pytest.raises(ConflictError):
            s.append(users(1), expect_version=3)
        assert s.info() is None
        assert s.append(users(1), expect_version=0) == 1
        assert s.append(users(1, "b"), expect_version=1) == 2
        with pytest.raises(ConflictError):
            s.append(users(1, "c"), expect_version=1)
        assert texts(s.history()) == ["m0", "b0"]

    def test_expect_message_is_compare_and_set(self, store: Any) -> None:
        """expect_message appends only if the session stores that id (hidden ones
        count; a message of the batch itself does not); otherwise ConflictError and
        nothing written, also when the session was deleted and made again at the
        same version. A retry of a stored batch is still a no-op.
        Failing: the id check and the write are not one atomic step, or the check
        looks at the visible history only (or, on PostgreSQL, at the batch's first
        message just inserted: a mutant survived the suite).
        """
        s = store.session("s")
        first = users(1)
        with pytest.raises(ConflictError):
            s.append(users(1, "x"), expect_message=first[0].id)
        assert s.info() is None
        s.append(first)
        own = users(2, "own")
        with pytest.raises(ConflictError):  # a message of the batch is not stored yet
            s.append(own, expect_message=own[0].id)
        s.append(users(1, "b"), expect_message=first[0].id)
        s.trim(keep_last=1)  # first[0] hidden, still stored
        assert s.append(users(1, "c"), expect_message=first[0].id) == 4
        s.delete()
        s.append(users(1, "d"))
        s.append(users(1, "e"))
        s.append(users(1, "f"))
        last = users(1, "g")
        s.append(last)  # version 4 again, without first[0]
        with pytest.raises(ConflictError):
            s.append(users(1, "h"), expect_message=first[0].id)
        assert texts(s.history()) == ["d0", "e0", "f0", "g0"]
        assert s.append(last, expect_message="nope") == 4  # a retry

    def test_idempotency_is_checked_before_the_version(self, store: Any) -> None:
        """A retry whose ids are stored succeeds even with a stale expect_version:
        the retry of an append that landed must not look like a conflict.
        Failing: the backend checks expect_version before the stored ids.
        """
        s = store.session("s")
        batch = users(1)
        s.append(batch, expect_version=0)
        s.append(users(1, "other"))
        assert s.append(batch, expect_version=0) == 2

    def test_batch_is_atomic_and_adjacent(self, store: Any) -> None:
        """Invariant 2: all messages of one append, adjacent, in order.
        Failing: a batch is split, reordered or interleaved.
        """
        s = store.session("s")
        s.append(users(1, "a"))
        s.append(users(100, "b"))
        s.append(users(1, "c"))
        assert texts(s.history()) == ["a0", *[f"b{i}" for i in range(100)], "c0"]
