"""MemvaultSession as an OpenAIResponsesCompactionAwareSession, on every backend.

A stub stands for the OpenAI client (no network): it records each
``responses.compact`` request and answers with a fixed compacted output, or
raises, or waits while the test writes concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest
from agents.memory import SessionSettings
from agents.memory.session import is_openai_responses_compaction_aware_session

import memvault
from memvault import InvalidMessageError
from memvault.integrations.openai_agents import MemvaultSession

COMPACTED = [
    {"type": "compaction", "encrypted_content": "opaque"},
    {"role": "user", "content": "remember: Wang"},
]


class StubResponses:
    """``client.responses``: records requests; ``during`` runs inside the call."""

    def __init__(
        self, during: Callable[[], Awaitable[None]] | None = None, error: Exception | None = None
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.during = during
        self.error = error

    async def compact(self, **request: Any) -> Any:
        self.requests.append(request)
        if self.during is not None:
            await self.during()
        if self.error is not None:
            raise self.error
        return SimpleNamespace(output=[dict(i) for i in COMPACTED])


def user(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"u{n}"}


def turn(n: int) -> list[dict[str, Any]]:
    """A user turn and the model's answer: one compaction candidate."""
    return [
        user(n),
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"a{n}", "annotations": []}],
        },
    ]


@pytest.fixture
async def store(any_store_url: str) -> Any:
    async with memvault.open_async(any_store_url) as store:
        yield store


def session(store: Any, stub: StubResponses, name: str = "c") -> MemvaultSession:
    return MemvaultSession(name, store, compaction_client=SimpleNamespace(responses=stub))


async def test_compaction_stores_a_summary_and_keeps_the_originals(store: Any) -> None:
    stub = StubResponses()
    s = session(store, stub)
    assert is_openai_responses_compaction_aware_session(s)
    originals = turn(1) + turn(2)
    await s.add_items(originals)
    await s.run_compaction({"force": True})
    assert stub.requests == [{"model": "gpt-4.1", "input": originals}]
    assert await s.get_items() == COMPACTED
    await s.add_items(turn(3))
    assert await s.get_items() == COMPACTED + turn(3)
    full = await s.async_session.history(full=True)
    assert [m.metadata.get("openai_agents") for m in full[:4]] == originals
    info = await s.async_session.info()
    assert info.summarized == 4 and (await s.async_session.log())[-2].op == "summarize"


async def test_unforced_compaction_waits_for_the_threshold(store: Any) -> None:
    stub = StubResponses()
    s = session(store, stub)
    for n in range(9):
        await s.add_items(turn(n))
    await s.run_compaction({"response_id": "resp_1", "store": False})
    assert stub.requests == []  # 9 candidates: the SDK's default hook says no
    await s.add_items(turn(9))
    await s.run_compaction({"response_id": "resp_1", "store": False})
    assert len(stub.requests) == 1 and "input" in stub.requests[0]
    await s.add_items(turn(10))
    await s.run_compaction({"response_id": "resp_2", "force": True})
    assert stub.requests[1] == {"model": "gpt-4.1", "previous_response_id": "resp_2"}


async def test_items_added_while_compaction_runs_are_kept(store: Any) -> None:
    other = MemvaultSession("c", store)

    async def meanwhile() -> None:
        await other.add_items(turn(3))

    s = session(store, StubResponses(during=meanwhile))
    await s.add_items(turn(1) + turn(2))
    await s.run_compaction({"force": True})
    assert await s.get_items() == COMPACTED + turn(3)


@pytest.mark.parametrize("failure", ["raises", "cancelled"])
async def test_a_failed_compaction_changes_nothing(store: Any, failure: str) -> None:
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    stub = (
        StubResponses(error=RuntimeError("compact failed"))
        if failure == "raises"
        else StubResponses(during=hang)
    )
    s = session(store, stub)
    await s.add_items(turn(1) + turn(2))
    before = (await s.get_items(), await s.async_session.info())
    task = asyncio.create_task(s.run_compaction({"force": True}))
    if failure == "cancelled":
        await started.wait()
        task.cancel()
    with pytest.raises(RuntimeError if failure == "raises" else asyncio.CancelledError):
        await task
    assert (await s.get_items(), await s.async_session.info()) == before


async def test_compaction_refused_when_its_items_were_popped_meanwhile(store: Any) -> None:
    other = MemvaultSession("c", store)

    async def pop() -> None:
        await other.pop_item()

    s = session(store, StubResponses(during=pop))
    await s.add_items(turn(1))
    with pytest.raises(InvalidMessageError):
        await s.run_compaction({"force": True})
    assert await s.get_items() == [user(1)]


async def test_rollback_and_pop_undo_a_compaction(store: Any) -> None:
    s = session(store, StubResponses())
    await s.add_items(turn(1))
    await s.snapshot("before")
    await s.run_compaction({"force": True})
    await s.rollback("before")
    assert await s.get_items() == turn(1)
    await s.run_compaction({"force": True})
    assert await s.pop_item() == COMPACTED[-1]
    assert await s.get_items() == turn(1)


async def test_no_compaction_while_a_tool_call_waits(store: Any) -> None:
    stub = StubResponses()
    s = session(store, stub)
    await s.add_items(
        [
            user(1),
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "add",
                "arguments": "{}",
                "id": "fc_1",
            },
        ]
    )
    await s.run_compaction({"force": True})
    assert stub.requests == []


async def test_limit_never_splits_a_call_from_its_output(store: Any) -> None:
    s = MemvaultSession("t", store)
    calls = [
        {
            "type": "function_call",
            "call_id": f"call_{n}",
            "name": "add",
            "arguments": "{}",
            "id": f"fc_{n}",
        }
        for n in (1, 2)
    ]
    outputs = [
        {"type": "function_call_output", "call_id": f"call_{n}", "output": str(n)} for n in (1, 2)
    ]
    await s.add_items([user(0), *calls, *outputs, user(3)])
    assert await s.get_items(limit=4) == [calls[1], outputs[1], user(3)]
    assert await s.get_items(limit=3) == [user(3)]
    assert await s.get_items(limit=5) == [*calls, *outputs, user(3)]
    assert len(await s.get_items()) == 6


async def test_limit_counts_compacted_items(store: Any) -> None:
    s = session(store, StubResponses())
    await s.add_items(turn(1))
    await s.run_compaction({"force": True})
    await s.add_items([user(2)])
    assert await s.get_items(limit=2) == [COMPACTED[-1], user(2)]
    assert await s.get_items(limit=9) == [*COMPACTED, user(2)]


async def test_session_settings_dict_is_normalized(store: Any) -> None:
    s = MemvaultSession("d", store, session_settings={"limit": 1})
    assert isinstance(s.session_settings, SessionSettings) and s.session_settings.limit == 1
    await s.add_items([user(1), user(2)])
    assert await s.get_items() == [user(2)]
