"""The model-based test over every registered backend (the toolkit ships it; any
backend can run it through memvault.testing.check_against_model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memvault.testing import Opener, check_against_model


def test_backend_agrees_with_reference(any_store_url: str) -> None:
    persistent = not any_store_url.startswith("memory:")
    check_against_model(Opener(any_store_url), reopen=persistent, max_examples=25, steps=25)


def test_model_catches_a_disagreement(tmp_path: Path) -> None:
    """A backend whose pop hides two messages is caught, with the steps printed."""
    from memvault.examples.jsonfile import JsonFileBackend

    class PopsTwice(JsonFileBackend):
        def pop(self, session_id, w):  # type: ignore[no-untyped-def]
            first = super().pop(session_id, w)
            super().pop(session_id, w)
            return first

    opener = Opener("popstwice:", factory=lambda: PopsTwice(tmp_path / "s.json"))
    with pytest.raises(AssertionError, match="the reference"):
        check_against_model(opener, max_examples=50, steps=15)
