"""Hypothesis: arbitrary framework objects round-trip exactly through every backend.

Each example uses a fresh session of one store opened per test; the backends come
from tests/support/backends.py, so every backend registered there is covered.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import message_to_dict

import memvault
from memvault.integrations.langchain import MemvaultChatMessageHistory
from memvault.integrations.openai_agents import MemvaultSession
from tests.support import agents_fakes, langchain_fakes

T = TypeVar("T")
EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
cuts = st.lists(st.integers(min_value=1, max_value=4), max_size=8)


def batches(values: list[T], sizes: list[int]) -> Iterator[list[T]]:
    """``values`` cut into consecutive batches of the given sizes (the rest last)."""
    start = 0
    for size in sizes:
        if start < len(values):
            yield values[start : start + size]
            start += size
    if start < len(values):
        yield values[start:]


def sid() -> str:
    return f"prop-{uuid.uuid4()}"


def dump(values: list[Any]) -> str:
    return json.dumps(values, ensure_ascii=False)


@pytest.fixture
def loop() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


def open_async(loop: asyncio.Runner, url: str) -> memvault.AsyncStore:
    """Open the store inside the loop its examples run on (native async drivers bind to it)."""

    async def opened() -> memvault.AsyncStore:
        return memvault.open_async(url)

    return loop.run(opened())


def window(items: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` items without the tool outputs whose call is not among
    them (a limited read never splits a call from its output)."""
    kept = items[-limit:] if limit else []

    def kind(item: dict[str, Any]) -> str | None:
        return item.get("type") if isinstance(item.get("type"), str) else None

    linked = [i for i in kept if kind(i) and isinstance(i.get("call_id"), str)]
    calls = {i["call_id"] for i in linked if not str(kind(i)).endswith("_output")}
    return [
        i
        for i in kept
        if not (i in linked and str(kind(i)).endswith("_output") and i["call_id"] not in calls)
    ]


def test_every_agents_item_kind_round_trips(any_store_url: str, loop: asyncio.Runner) -> None:
    store = open_async(loop, any_store_url)

    async def check(items: list[dict[str, Any]], sizes: list[int], limit: int) -> None:
        session = MemvaultSession(sid(), store)
        for batch in batches(items, sizes):
            await session.add_items(batch)  # type: ignore[arg-type]
        got = await session.get_items()
        assert got == items and dump(got) == dump(items)  # same types, same key order
        assert dump(await session.get_items(limit)) == dump(window(items, limit))
        assert await session.pop_item() == (items[-1] if items else None)
        assert dump(await session.get_items()) == dump(items[:-1])

    @EXAMPLES
    @given(agents_fakes.item_lists, cuts, st.integers(min_value=0, max_value=9))
    def run(items: list[dict[str, Any]], sizes: list[int], limit: int) -> None:
        loop.run(check(items, sizes, limit))

    try:
        run()
    finally:
        loop.run(store.close())


def test_every_langchain_message_type_round_trips_sync(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:

        @EXAMPLES
        @given(langchain_fakes.message_lists, cuts)
        def run(messages: list[Any], sizes: list[int]) -> None:
            history = MemvaultChatMessageHistory(sid(), store=store)
            for batch in batches(messages, sizes):
                history.add_messages(batch)
            got = history.messages
            assert len(got) == len(messages)
            assert all(langchain_fakes.same(g, w) for g, w in zip(got, messages, strict=True))
            assert dump([message_to_dict(m) for m in got]) == dump(
                [message_to_dict(m) for m in messages]
            )

        run()


def test_every_langchain_message_type_round_trips_async(
    any_store_url: str, loop: asyncio.Runner
) -> None:
    store = open_async(loop, any_store_url)

    async def check(messages: list[Any], sizes: list[int]) -> None:
        history = MemvaultChatMessageHistory(sid(), async_store=store)
        for batch in batches(messages, sizes):
            await history.aadd_messages(batch)
        got = await history.aget_messages()
        assert len(got) == len(messages)
        assert all(langchain_fakes.same(g, w) for g, w in zip(got, messages, strict=True))
        assert dump([message_to_dict(m) for m in got]) == dump(
            [message_to_dict(m) for m in messages]
        )

    @EXAMPLES
    @given(langchain_fakes.message_lists, cuts)
    def run(messages: list[Any], sizes: list[int]) -> None:
        loop.run(check(messages, sizes))

    try:
        run()
    finally:
        loop.run(store.close())
