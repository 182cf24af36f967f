"""The backend agrees with the in-memory reference on random operation sequences."""

from __future__ import annotations

from typing import Any, ClassVar

from memvault.testing.contract.base import ContractBase
from memvault.testing.reference import check_against_model


class ModelContract(ContractBase):
    model_examples: ClassVar[int] = 15
    """Hypothesis examples per run (each a sequence of up to ``model_steps`` steps)."""
    model_steps: ClassVar[int] = 20

    def test_agrees_with_the_reference_model(self, opener: Any) -> None:
        """Random sequences of append, batch append, retry, pop, trim, clear, snapshot,
        rollback, fork, delete (and close-and-reopen when persistent) give the same
        results, errors, histories, snapshots, versions and event logs as memory://,
        after every step. Failing: Hypothesis prints the shortest sequence of steps
        that makes the backend disagree, and the diff names the session and the
        missing, extra or changed messages, snapshots or events."""
        check_against_model(
            opener,
            reopen="persistent" in self.capabilities,
            max_examples=self.model_examples,
            steps=self.model_steps,
        )
