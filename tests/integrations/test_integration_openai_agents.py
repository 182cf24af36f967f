"""MemvaultSession against the OpenAI Agents SDK, on every registered backend.

The SDK's own SQLiteSession is the oracle: the same scripted run, or the same
calls, must give the same items.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.memory import Session as SessionProtocol
from agents.memory import SessionSettings
from hypothesis import given, settings
from hypothesis import strategies as st

import memvault
from memvault import ConfigurationError, InvalidMessageError, Message, ToolCall
from memvault.integrations.openai_agents import MemvaultSession, UnsupportedMessageError
from tests.support.agents_fakes import ScriptedModel, call, kinds, say, think

RUN = RunConfig(tracing_disabled=True)


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script() -> list[list[Any]]:
    return [
        [think("rs_1", "need the tool"), call("fc_1", "call_1", "add", '{"a": 1, "b": 2}')],
        [say("msg_1", "1 + 2 = 3")],
        [
            call("fc_2", "call_2", "add", '{"a":3,"b":4}'),
            call("fc_3", "call_3", "add", '{"a":5,"b":6}'),
        ],
        [say("msg_2", "7 and 11 \u200f\U0001f600\x00")],
    ]


async def converse(session: Any) -> tuple[list[Any], ScriptedModel]:
    model = ScriptedModel(script())
    agent = Agent(name="calc", instructions="Add numbers.", model=model, tools=[add])
    outputs = []
    for question in ["What is 1 + 2?", "And 3 + 4, 5 + 6?"]:
        result = await Runner.run(agent, question, session=session, run_config=RUN)
        outputs.append(result.final_output)
    return outputs, model


@pytest.fixture
async def store(any_store_url: str) -> Any:
    async with memvault.open_async(any_store_url) as store:
        yield store


async def test_multi_turn_run_with_tool_calls_matches_the_sdk_sqlite_session(store: Any) -> None:
    ours = MemvaultSession("run-1", store)
    theirs = SQLiteSession("run-1")
    got, got_model = await converse(ours)
    want, want_model = await converse(theirs)
    assert got == want == ["1 + 2 = 3", "7 and 11 \u200f\U0001f600\x00"]
    assert json.dumps(got_model.inputs) == json.dumps(want_model.inputs)
    assert json.dumps(await ours.get_items()) == json.dumps(await theirs.get_items())
    kinds = [item.get("type") for item in await ours.get_items()]
    assert kinds.count("function_call") == 3 and kinds.count("function_call_output") == 3
    assert "reasoning" in kinds


async def test_the_run_is_readable_by_a_later_session_object(store: Any) -> None:
    await converse(MemvaultSession("run-2", store))
    later = MemvaultSession("run-2", store)
    history = await later.async_session.history()
    assert [m.role for m in history[:4]] == ["user", "assistant", "assistant", "tool"]
    assert history[2].tool_calls == (
        ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}'),
    )
    assert history[3].tool_call_id == "call_1" and history[3].content == "3"
    assert history[4].content == "1 + 2 = 3"
    assert len(await later.get_items()) == len(history)


@pytest.mark.parametrize("limit", [None, 0, 1, 2, 5, 6, 50, -1])
@pytest.mark.parametrize("default", [None, 3])
async def test_limit_semantics_are_the_sdk_sqlite_sessions(
    store: Any, limit: int | None, default: int | None
) -> None:
    settings = SessionSettings(limit=default)
    ours = MemvaultSession("lim", store, session_settings=settings)
    theirs = SQLiteSession("lim", session_settings=settings)
    items = [{"role": "user", "content": f"turn {i}"} for i in range(6)]
    for session in (ours, theirs):
        await session.add_items(items[:2])
        await session.add_items(items[2:])
    assert await ours.get_items(limit) == await theirs.get_items(limit)


async def test_pop_and_clear_behave_like_the_sdk_sqlite_session(store: Any) -> None:
    ours, theirs = MemvaultSession("pop", store), SQLiteSession("pop")
    items = [
        {"role": "user", "content": "a"},
        {"id": "m1", "type": "message", "role": "assistant", "status": "completed", "content": []},
    ]
    for session in (ours, theirs):
        assert await session.pop_item() is None
        await session.add_items(items)
    assert await ours.pop_item() == await theirs.pop_item() == items[1]
    assert await ours.get_items() == await theirs.get_items() == items[:1]
    await ours.clear_session()
    assert await ours.get_items() == [] and await ours.pop_item() is None
    assert [e.op for e in await ours.async_session.log()] == ["append", "pop", "clear"]


async def test_popped_items_added_back_are_stored_again(store: Any) -> None:
    # The SDK does this when it rewinds a turn: pop the tail, then add it back.
    session = MemvaultSession("rewind", store)
    items = [
        {"role": "user", "content": "q"},
        {"id": "rs_9", "type": "reasoning", "summary": []},
        {"id": "fc_9", "type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"},
    ]
    await session.add_items(items)
    popped = [await session.pop_item(), await session.pop_item()]
    assert await session.get_items() == items[:1]
    await session.add_items(list(reversed(popped)))
    assert await session.get_items() == items
    await session.clear_session()
    await session.add_items(items)
    assert await session.get_items() == items


async def test_repeating_the_items_that_end_the_history_is_a_no_op(store: Any) -> None:
    session = MemvaultSession("retry", store)
    batch = [
        {"role": "user", "content": "hi"},
        {
            "id": "msg_7",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [],
        },
    ]
    await session.add_items(batch)
    await session.add_items(batch)  # e.g. a retry after OutcomeUnknownError
    assert await session.get_items() == batch
    await session.add_items([{"role": "user", "content": "next"}])
    await session.add_items(batch)  # older turns repeated: a new turn, stored again
    assert await session.get_items() == [*batch, {"role": "user", "content": "next"}, *batch]


async def test_reused_ids_with_the_same_content_in_later_turns_are_stored(store: Any) -> None:
    # A test model answering every turn with the same item, same id.
    session = MemvaultSession("same-reply", store)
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    for turn in range(3):
        await session.add_items([{"role": "user", "content": f"turn {turn}"}])
        await session.add_items([reply])
    assert len(await session.get_items()) == 6


async def test_a_concurrent_writer_does_not_make_the_append_repeat(store: Any) -> None:
    session = MemvaultSession("race", store)
    other = store.session("race")
    real_append = session.async_session.append

    async def append_then_another_writer(messages: Any, **kwargs: Any) -> int:
        version = await real_append(messages, **kwargs)
        await other.append([Message.user("written by another worker")])
        return version

    session.async_session.append = append_then_another_writer  # type: ignore[method-assign]
    batch = [
        {"role": "user", "content": "q"},
        {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
    ]
    await session.add_items(batch)
    got = await session.get_items()
    assert got == [*batch, {"role": "user", "content": "written by another worker"}]


async def test_items_without_a_real_id_are_always_added(store: Any) -> None:
    session = MemvaultSession("fake-ids", store)
    # Chat-completions models give every item the placeholder id __fake_id__.
    first = {"id": "__fake_id__", "type": "message", "role": "assistant", "content": []}
    second = {**first, "status": "completed"}
    reference = {"type": "item_reference", "id": "msg_1"}
    visible = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    for batch in ([first], [second], [first], [visible], [reference], [reference]):
        await session.add_items(batch)
    assert await session.get_items() == [first, second, first, visible, reference, reference]


async def test_a_batch_repeating_an_id_is_stored_whole(store: Any) -> None:
    session = MemvaultSession("dup", store)
    a = {"id": "x", "type": "reasoning", "summary": []}
    b = {"id": "x", "type": "reasoning", "summary": [{"type": "summary_text", "text": "b"}]}
    await session.add_items([a, b, a])
    assert await session.get_items() == [a, b, a]


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": ("a", "tuple")},
        {"role": "user", "content": "x", "extra": {1, 2}},
        {"role": "user", "content": "x", "score": float("nan")},
        {"role": "user", "content": "x", "weights": {1: "int key"}},
        {"role": "user", "content": b"bytes"},
        {"role": "user", "content": "lone \ud800 surrogate"},
        "not a mapping",
    ],
)
async def test_an_item_that_cannot_be_stored_exactly_raises_and_writes_nothing(
    store: Any, bad: Any
) -> None:
    session = MemvaultSession("bad", store)
    with pytest.raises(InvalidMessageError):
        await session.add_items([{"role": "user", "content": "fine"}, bad])
    assert await session.get_items() == []


async def test_snapshot_rollback_and_fork(store: Any) -> None:
    session = MemvaultSession("main", store, session_settings=SessionSettings(limit=10))
    first = [{"role": "user", "content": "one"}]
    await session.add_items(first)
    await session.snapshot("after-one")
    await session.add_items([{"role": "user", "content": "two"}])
    await session.clear_session()
    undo = await session.rollback("after-one")
    assert await session.get_items() == first
    fork = await session.fork("main-fork", at=undo.name)
    assert fork.session_settings == session.session_settings
    assert await fork.get_items() == []  # the state rollback replaced was the cleared one
    other = await session.fork("main-fork-2")
    await other.add_items([{"role": "user", "content": "only in the fork"}])
    assert await session.get_items() == first
    assert len(await other.get_items()) == 2


async def test_messages_written_by_other_writers_are_read_as_items(store: Any) -> None:
    native = store.session("shared")
    await native.append(
        [
            Message.system("Be brief."),
            Message.user([{"type": "input_text", "text": "hi"}]),
            Message.assistant(tool_calls=[ToolCall(id="c1", name="f", arguments='{"x":1}')]),
            Message.tool("42", tool_call_id="c1"),
            Message.assistant("done"),
        ]
    )
    session = MemvaultSession("shared", store)
    assert await session.get_items() == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"role": "assistant", "content": "done"},
    ]
    await native.append(
        [
            Message.assistant(
                "text and", tool_calls=[ToolCall(id="c2", name="f"), ToolCall(id="c3", name="g")]
            )
        ]
    )
    with pytest.raises(UnsupportedMessageError) as raised:
        await session.get_items()
    assert raised.value.message.tool_calls[1].id == "c3"
    info = await native.info()
    assert info is not None and info.length == 6  # reading hid nothing


async def test_is_an_sdk_session_and_opens_from_a_url(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/agent.db"
    async with MemvaultSession("u", url, writer="tests") as session:
        assert isinstance(session, SessionProtocol)
        assert session.session_id == "u" and session.session_settings == SessionSettings()
        await session.add_items([{"role": "user", "content": "persisted"}])
        assert (await session.async_session.log())[0].writer == "tests"
    async with MemvaultSession("u", url) as again:
        assert await again.get_items() == [{"role": "user", "content": "persisted"}]


def test_bad_construction_is_a_configuration_error() -> None:
    with (
        memvault.open("memory://") as sync_store,
        pytest.raises(ConfigurationError, match="open_async"),
    ):
        MemvaultSession("s", sync_store)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown store URL"):
        MemvaultSession("s", "nosuch://x")
    with pytest.raises(InvalidMessageError):
        MemvaultSession("", "memory://")


async def test_options_with_an_open_store_are_refused(store: Any) -> None:
    with pytest.raises(ConfigurationError, match="options"):
        MemvaultSession("s", store, ttl=5)


@pytest.mark.parametrize(("name", "kind"), kinds, ids=[name for name, _ in kinds])
def test_each_item_kind_of_the_sdk_round_trips(name: str, kind: Any) -> None:
    @settings(max_examples=10, deadline=None)
    @given(st.lists(kind, min_size=1, max_size=3))
    def check(items: list[dict[str, Any]]) -> None:
        async def run() -> None:
            async with MemvaultSession("kind", "memory://") as session:
                await session.add_items(items)  # type: ignore[arg-type]
                got = await session.get_items()
                assert json.dumps(got) == json.dumps(items)
                for item, message in zip(items, await session.async_session.history(), strict=True):
                    if str(item.get("type")).endswith("_output"):
                        assert message.role == "tool"

        asyncio.run(run())

    check()
