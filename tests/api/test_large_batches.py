"""Idempotent retries hold for batches of any size the limits allow, on every
backend (a backend may look stored ids up differently for large batches)."""

from __future__ import annotations

import pytest

import memvault
from memvault import Message
from memvault.errors import DuplicateMessageError


@pytest.mark.parametrize("size", [1, 64, 65, 1000])
def test_retried_and_mixed_batches_of_any_size(any_store_url: str, size: int) -> None:
    with memvault.open(any_store_url) as store:
        s = store.session("s")
        batch = [Message.user(f"m{i}") for i in range(size)]
        assert s.append(batch) == 1
        assert s.append(batch) == 1  # the retry is a no-op
        mixed = [*batch[1:], Message.user("new")] if size > 1 else [*batch, Message.user("new")]
        with pytest.raises(DuplicateMessageError):
            s.append(mixed)
        assert [m.content for m in s.history()] == [f"m{i}" for i in range(size)]
        assert s.info().version == 1
