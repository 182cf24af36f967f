"""Arguments, limits and messages are checked in the facade, before any I/O, the
same way on every backend, and every such mistake is a memvault error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import memvault
from memvault import (
    ConfigurationError,
    InvalidArgumentError,
    InvalidMessageError,
    Limits,
    MemvaultError,
    Message,
    ToolCall,
)

OUT_OF_RANGE = [-1, 2**63, 99999999999999999999, -(2**63), 1.5, "3", True]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_counts_out_of_range_are_refused_on_every_backend(any_store_url: str, value: Any) -> None:
    """`last=`, `keep_last=`, `expect_version=`, `keep_events=` out of int64 range (or
    negative, or not an int) raise InvalidArgumentError, a ValueError, and write nothing."""
    with memvault.open(any_store_url) as store:
        s = store.session("s")
        s.append([Message.user("x")])
        calls: list[Callable[[], object]] = [
            lambda: s.trim(keep_last=value),
            lambda: s.append([Message.user("y")], expect_version=value),
            lambda: store.compact(keep_events=value),
            lambda: s.history(last=value),
        ]
        for call in calls:
            with pytest.raises(InvalidArgumentError) as caught:
                call()
            assert isinstance(caught.value, ValueError)
            assert not isinstance(caught.value, InvalidMessageError)
        info = s.info()
        assert info is not None and info.version == 1 and info.length == 1


def test_largest_counts_are_accepted(any_store_url: str) -> None:
    """2**63 - 1 is in range: it reads everything, keeps everything."""
    with memvault.open(any_store_url) as store:
        s = store.session("s")
        s.append([Message.user("x")])
        assert [m.content for m in s.history(last=2**63 - 1)] == ["x"]
        store.compact(keep_events=2**63 - 1)
        assert s.info() is not None


def test_async_facade_refuses_the_same_counts(any_store_url: str) -> None:
    async def go() -> None:
        async with memvault.open_async(any_store_url) as store:
            s = store.session("s")
            for call in (
                lambda: s.history(last=2**63),
                lambda: s.trim(keep_last=-1),
                lambda: store.compact(keep_events=2**64),
            ):
                with pytest.raises(InvalidArgumentError):
                    await call()
            assert await s.info() is None

    asyncio.run(go())


@pytest.mark.parametrize(
    "fields",
    [
        {"max_batch": -1},
        {"max_batch": 0},
        {"max_session_id": "x"},
        {"max_message_bytes": 1.5},
        {"max_snapshot_name": True},
        {"max_batch": 2**63},
    ],
)
def test_limits_are_validated_when_built(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Limits(**fields)
    assert next(iter(fields)) in str(caught.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Message.user(42),  # type: ignore[arg-type]
        lambda: Message(role="robot", content="x"),  # type: ignore[arg-type]
        lambda: Message.assistant(None),
        lambda: Message.model_validate({"role": "user", "content": "x", "extra": 1}),
        lambda: ToolCall(id=1, name="f"),  # type: ignore[arg-type]
    ],
)
def test_bad_messages_raise_invalid_message_error(make: Callable[[], object]) -> None:
    """Pydantic's details are kept (the field named, the cause chained), on one line."""
    with pytest.raises(InvalidMessageError) as caught:
        make()
    text = str(caught.value)
    assert isinstance(caught.value, MemvaultError) and "\n" not in text
    assert caught.value.__cause__ is not None


def test_bad_role_names_the_field() -> None:
    with pytest.raises(InvalidMessageError, match="role"):
        Message(role="robot", content="x")  # type: ignore[arg-type]


def test_bad_page_arguments_raise_before_any_io() -> None:
    """sessions_page's arguments are checked before the backend is asked anything."""

    class NoIo:
        def sessions_page(self, *args: object) -> None:
            raise AssertionError("the backend was asked")

    store = memvault.open("memory://")
    store.backend = NoIo()  # type: ignore[assignment]
    for kwargs in (
        {"limit": 0},
        {"order": "name"},
        {"cursor": "junk"},
        {"match": 3},
        {"descending": 1},
    ):
        with pytest.raises(memvault.InvalidArgumentError):
            store.sessions_page(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [3, b"id", "", "x" * 257, "\ud800", ["id"]])
def test_bad_expect_message_is_refused_on_every_backend(any_store_url: str, value: Any) -> None:
    """`expect_message=` must be a message id (a non-empty string of at most 256
    characters, valid Unicode): anything else raises InvalidArgumentError before any
    I/O, on every backend and face, and writes nothing."""
    with memvault.open(any_store_url) as store:
        s = store.session("s")
        s.append([Message.user("x")])
        with pytest.raises(InvalidArgumentError, match="expect_message"):
            s.append([Message.user("y")], expect_message=value)
        info = s.info()
        assert info is not None and info.version == 1 and info.length == 1

    async def go() -> None:
        async with memvault.open_async(any_store_url) as store:
            with pytest.raises(InvalidArgumentError, match="expect_message"):
                await store.session("s").append([Message.user("y")], expect_message=value)
            info = await store.session("s").info()
            assert info is not None and info.version == 1

    if not any_store_url.startswith("memory:"):
        asyncio.run(go())
