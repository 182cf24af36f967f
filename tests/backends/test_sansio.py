"""memvault.sansio: the one driver of operations written without I/O."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from memvault.sansio import drive, drive_async


def doubling(log: list[str]) -> Generator[int, Any, str]:
    """Asks for 1, then for what it got back plus one; returns both replies."""
    try:
        first = yield 1
        second = yield first + 1
        return f"{first},{second}"
    finally:
        log.append("closed")


def test_drive_sends_each_reply_back_and_returns_the_result() -> None:
    log: list[str] = []
    assert drive(doubling(log), lambda n: n * 10) == "10,110"
    assert log == ["closed"]


def test_drive_async_is_the_same_awaited() -> None:
    async def perform(n: int) -> int:
        return n * 10

    assert asyncio.run(drive_async(doubling([]), perform)) == "10,110"


def test_an_error_while_performing_propagates_and_closes_the_operation() -> None:
    log: list[str] = []

    def fail(n: int) -> int:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError, match="down"):
        drive(doubling(log), fail)
    assert log == ["closed"]
