"""MemvaultChatMessageHistory against langchain-core, on every registered backend.

LangChain's own InMemoryChatMessageHistory is the oracle: the same chain run
with either history must show the model the same messages and store the same.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

import memvault
from memvault import ConfigurationError, InvalidMessageError, Message, ToolCall
from memvault.integrations.langchain import MemvaultChatMessageHistory
from tests.support.langchain_fakes import same

CALL = {"name": "add", "args": {"a": 1, "b": [2, 3.5]}, "id": "call_1", "type": "tool_call"}


def turns() -> list[list[BaseMessage]]:
    return [
        [HumanMessage("Add 1 and 2, please. \u200f\U0001f600\x00", name="wang")],
        [ToolMessage("3", tool_call_id="call_1", artifact={"raw": [3]}, status="success")],
        [HumanMessage([{"type": "text", "text": "thanks"}, "!"])],
    ]


def replies() -> list[BaseMessage]:
    return [
        AIMessage(
            "",
            id="ai-1",
            tool_calls=[CALL],
            invalid_tool_calls=[
                {
                    "type": "invalid_tool_call",
                    "name": "sub",
                    "args": "{oops",
                    "id": "call_2",
                    "error": "bad JSON",
                }
            ],
            usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        ),
        AIMessage("It is 3.", id="ai-2", additional_kwargs={"refusal": None}),
        AIMessage([{"type": "text", "text": "You are welcome"}], id="ai-3"),
    ]


def chain(histories: Callable[[str], BaseChatMessageHistory], seen: list[Any]) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You add numbers."),
            MessagesPlaceholder("history"),
            MessagesPlaceholder("input"),
        ]
    )
    model = FakeMessagesListChatModel(responses=replies())
    record = RunnableLambda(lambda value: seen.append(value.to_messages()) or value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RunnableWithMessageHistory is deprecated upstream
        return RunnableWithMessageHistory(
            prompt | record | model,
            histories,
            input_messages_key="input",
            history_messages_key="history",
        )


CONFIG = {"configurable": {"session_id": "user-42"}}


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as store:
        yield store


@pytest.fixture
async def async_store(any_store_url: str) -> Any:
    async with memvault.open_async(any_store_url) as store:
        yield store


def oracle() -> tuple[list[Any], list[BaseMessage], list[Any]]:
    histories: dict[str, InMemoryChatMessageHistory] = {}
    seen: list[Any] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated upstream, still the reference
        histories["user-42"] = InMemoryChatMessageHistory()
    run = chain(lambda sid: histories[sid], seen)
    outputs = [run.invoke({"input": messages}, CONFIG) for messages in turns()]
    return outputs, histories["user-42"].messages, seen


def test_runnable_with_message_history_sync_matches_in_memory_history(
    store: memvault.Store,
) -> None:
    seen: list[Any] = []
    run = chain(lambda sid: MemvaultChatMessageHistory(sid, store=store), seen)
    outputs = [run.invoke({"input": messages}, CONFIG) for messages in turns()]
    want_outputs, want_history, want_seen = oracle()
    assert outputs == want_outputs
    assert len(seen) == 3 and seen == want_seen
    got = MemvaultChatMessageHistory("user-42", store=store).messages
    assert len(got) == 6 and all(same(g, w) for g, w in zip(got, want_history, strict=True))


async def test_runnable_with_message_history_async_uses_only_the_async_store(
    async_store: memvault.AsyncStore,
) -> None:
    # No sync store at all: any call to a sync method raises ConfigurationError.
    seen: list[Any] = []
    run = chain(lambda sid: MemvaultChatMessageHistory(sid, async_store=async_store), seen)
    outputs = [await run.ainvoke({"input": messages}, CONFIG) for messages in turns()]
    want_outputs, want_history, want_seen = oracle()
    assert outputs == want_outputs and seen == want_seen
    got = await MemvaultChatMessageHistory("user-42", async_store=async_store).aget_messages()
    assert len(got) == 6 and all(same(g, w) for g, w in zip(got, want_history, strict=True))


class Exploding:
    """A backend that fails the test if anything calls it (a store made on it looks up
    what it has, once: that is not a call)."""

    def __getattr__(self, name: str) -> Any:
        def explode(*args: Any) -> Any:
            raise AssertionError(f"the async path called the sync store ({name})")

        return explode


async def test_async_methods_never_touch_the_sync_store(async_store: memvault.AsyncStore) -> None:
    trap = memvault.Store(Exploding(), async_store.options)  # type: ignore[arg-type]
    history = MemvaultChatMessageHistory("s", store=trap, async_store=async_store)
    await history.aadd_messages([HumanMessage("hi"), AIMessage("hello", id="a1")])
    await history.aadd_messages([AIMessage("hello", id="a1")])
    assert [m.content for m in await history.aget_messages()] == ["hi", "hello"]
    await history.aclear()
    assert await history.aget_messages() == []
    with pytest.raises(AssertionError, match="sync store"):
        history.add_messages([HumanMessage("the trap works")])


def test_a_face_without_its_store_is_a_configuration_error(store: memvault.Store) -> None:
    history = MemvaultChatMessageHistory("s", store=store)
    with pytest.raises(ConfigurationError, match="async_store"):
        history.async_session  # noqa: B018
    with pytest.raises(ConfigurationError, match="store="):
        MemvaultChatMessageHistory("s")
    with pytest.raises(ConfigurationError, match=r"memvault\.Store"):
        MemvaultChatMessageHistory("s", store="memory://")  # type: ignore[arg-type]


def test_every_field_of_every_message_round_trips(store: memvault.Store) -> None:
    sent = (
        [m for turn in turns() for m in turn]
        + replies()
        + [
            SystemMessage("sys", id="s-1", additional_kwargs={"k": [1, 1.0, True, None]}),
            ChatMessage("critique", role="critic", name="judge"),
        ]
    )
    history = MemvaultChatMessageHistory("all", store=store)
    history.add_messages(sent)
    got = history.messages
    assert len(got) == len(sent) and all(same(g, w) for g, w in zip(got, sent, strict=True))
    native = history.session.history()
    assert [m.role for m in native] == [
        "user",
        "tool",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "system",
        "user",
    ]
    assert native[3].tool_calls == (
        ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": [2, 3.5]}'),
    )
    assert native[1].tool_call_id == "call_1" and native[2].content == "thanks!"
    assert native[0].name == "wang" and native[3].id == "ai-1"


def test_identified_messages_added_again_are_a_no_op_while_visible(store: memvault.Store) -> None:
    history = MemvaultChatMessageHistory("ids", store=store)
    batch = [HumanMessage("hi"), AIMessage("hello", id="a1")]
    history.add_messages(batch)
    history.add_messages(batch)  # a retry
    assert len(history.messages) == 2
    history.add_messages([HumanMessage("hi")])  # no id: always added
    assert len(history.messages) == 3


def test_clear_then_add_the_same_messages_back(store: memvault.Store) -> None:
    # The usual way to trim a LangChain history: clear, then add what to keep.
    history = MemvaultChatMessageHistory("trim", store=store)
    history.add_messages(
        [
            HumanMessage("old", id="h0"),
            AIMessage("older", id="a0"),
            HumanMessage("keep", id="h1"),
            AIMessage("kept", id="a1"),
        ]
    )
    kept = history.messages[2:]
    history.clear()
    assert history.messages == []
    history.add_messages(kept)
    assert history.messages == kept
    assert [e.op for e in history.session.log()] == ["append", "clear", "append"]


class Custom(HumanMessage):
    """A user-defined message class LangChain cannot rebuild."""


@pytest.mark.parametrize(
    "bad",
    [
        ToolMessage("x", tool_call_id="c", artifact=("a", "tuple")),
        ToolMessage("x", tool_call_id="c", artifact=object()),
        AIMessage("x", additional_kwargs={"n": float("inf")}),
        HumanMessage("x", response_metadata={1: "int key"}),
        HumanMessage("lone \udfff surrogate"),
        Custom("a subclass"),
        "not a message",
    ],
)
def test_a_message_that_cannot_be_stored_exactly_raises_and_writes_nothing(
    store: memvault.Store, bad: Any
) -> None:
    history = MemvaultChatMessageHistory("bad", store=store)
    with pytest.raises(InvalidMessageError):
        history.add_messages([HumanMessage("fine"), bad])
    assert history.messages == []


def test_messages_written_by_other_writers_are_read_as_langchain_messages(
    store: memvault.Store,
) -> None:
    session = store.session("shared")
    session.append(
        [
            Message.system("Be brief.", id="m1"),
            Message.developer("No tools today.", id="m2"),
            Message.user("hi", id="m3", name="wang"),
            Message.assistant(
                tool_calls=[
                    ToolCall(id="c1", name="f", arguments='{"x":1}'),
                    ToolCall(id="c2", name="g", arguments="not json"),
                ],
                id="m4",
            ),
            Message.tool([{"type": "text", "text": "42"}], tool_call_id="c1", id="m5"),
        ]
    )
    got = MemvaultChatMessageHistory("shared", store=store).messages
    assert got == [
        SystemMessage("Be brief.", id="m1"),
        ChatMessage("No tools today.", role="developer", id="m2"),
        HumanMessage("hi", id="m3", name="wang"),
        AIMessage(
            "",
            id="m4",
            tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}],
            invalid_tool_calls=[
                {
                    "name": "g",
                    "args": "not json",
                    "id": "c2",
                    "error": None,
                    "type": "invalid_tool_call",
                }
            ],
        ),
        ToolMessage([{"type": "text", "text": "42"}], tool_call_id="c1", id="m5"),
    ]
