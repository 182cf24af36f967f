"""The model-based test over every registered backend (the toolkit ships it; any
backend can run it through memvault.testing.check_against_model)."""

from __future__ import annotations

import pytest

from memvault.testing import Opener, check_against_model


def test_backend_agrees_with_reference(any_store_url: str) -> None:
    persistent = not any_store_url.startswith("memory:")
    check_against_model(Opener(any_store_url), reopen=persistent, max_examples=25, steps=25)


def test_model_catches_a_disagreement() -> None:
    """A backend whose pop hides two messages is caught, with the steps printed."""
    from memvault.backends.memory import MemoryBackend

    class PopsTwice(MemoryBackend):
        def pop(self, session_id, w):  # type: ignore[no-untyped-def]
            first = super().pop(session_id, w)
            super().pop(session_id, w)
            return first

    # In memory: on the example JSON-file backend every step rewrites the file, and this
    # test took 312 s at load 10, mostly shrinking. A fresh store per example.
    opener = Opener("popstwice:", factory=PopsTwice)
    with pytest.raises(AssertionError, match="the reference") as caught:
        check_against_model(opener, max_examples=50, steps=15)
    assert "state.pop(" in str(caught.value.__notes__), caught.value.__notes__
