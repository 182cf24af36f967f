"""Faults surface as documented errors, and retries store messages exactly once
(the ``OutcomeUnknownError`` promise)."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.checks.faults import inject_faults
from memvault.errors import BackendUnavailableError, OutcomeUnknownError
from memvault.testing.contract.base import ContractBase, texts, users


class FaultsContract(ContractBase):
    def test_append_failing_before_send_writes_nothing(self, store: Any) -> None:
        """An append that never reached the backend raises BackendUnavailableError and
        leaves no trace; the retry stores the batch once. Failing: the facade or the
        backend swallows or rewraps errors, or applied part of the batch."""
        faults = inject_faults(store)
        s = store.session("s")
        batch = users(2)
        faults.fail("append", when="before")
        with pytest.raises(BackendUnavailableError):
            s.append(batch)
        assert s.info() is None and s.log() == []
        assert s.append(batch) == 1
        assert texts(s.history()) == ["m0", "m1"]

    def test_retry_after_unknown_outcome_stores_once(self, store: Any) -> None:
        """An append that committed but whose reply was lost (OutcomeUnknownError),
        retried with the same messages, is stored exactly once, one event, one version
        bump. Failing: idempotent retries are broken; a timeout would duplicate turns."""
        faults = inject_faults(store)
        s = store.session("s")
        s.append(users(1, "first"))
        batch = users(3)
        faults.fail("append", when="after", times=2)
        for _ in range(2):
            with pytest.raises(OutcomeUnknownError):
                s.append(batch)
        assert s.append(batch) == 2
        assert s.append(batch) == 2
        assert texts(s.history()) == ["first0", "m0", "m1", "m2"]
        assert [e.op for e in s.log()] == ["append", "append"]
        assert faults.injected == [("append", "after"), ("append", "after")]

    def test_unknown_outcome_on_other_writes_is_visible_in_the_log(self, store: Any) -> None:
        """A pop or rollback whose reply was lost has applied exactly once; the log says
        so. Failing: the backend applied it twice or not at all."""
        s = store.session("s")
        s.append(users(3))
        s.snapshot("cp")
        faults = inject_faults(store)
        s = store.session("s")
        faults.fail("pop", when="after").fail("rollback", when="before")
        with pytest.raises(OutcomeUnknownError):
            s.pop()
        with pytest.raises(BackendUnavailableError):
            s.rollback("cp")
        assert texts(s.history()) == ["m0", "m1"]
        assert [e.op for e in s.log()] == ["append", "snapshot", "pop"]
        s.rollback("cp")
        assert texts(s.history()) == ["m0", "m1", "m2"]
