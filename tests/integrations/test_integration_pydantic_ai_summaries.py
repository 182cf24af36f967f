"""MemvaultSummarizer: summaries stored with memvault's summarize, from a real agent run.

The model is sent the summary and the newest messages; memvault keeps every
original, keeps what was saved meanwhile, and a rollback undoes the summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import memvault
from memvault import ConfigurationError, InvalidArgumentError
from memvault.integrations.pydantic_ai import MemvaultHistory, MemvaultSummarizer
from tests.support.pydantic_ai_agents import make_agent, orphans, stored_models

TURNS = ["one", "two", "three", "four"]


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as store:
        yield store


def summaries(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content or ""
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, CompactionPart)
    ]


class Recorder:
    """A summarizing function that says how many messages it was given."""

    def __init__(self) -> None:
        self.calls: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage]) -> str:
        self.calls.append(messages)
        return f"summary of {len(messages)} messages"


def test_a_long_conversation_is_summarized_in_memvault(store: memvault.Store) -> None:
    history, summarize, seen = MemvaultHistory("c", store=store), Recorder(), []
    summarizer = MemvaultSummarizer(history, summarize, max_messages=8, keep_last=3)
    agent = make_agent([ProcessHistory(summarizer)], seen)
    saved: list[ModelMessage] = []
    for prompt in TURNS:
        result = agent.run_sync(prompt, message_history=history.load())
        history.extend(result.new_messages())
        saved += result.new_messages()
        assert summaries(result.new_messages()) == []  # the run's own messages only
        assert history.load() == result.all_messages()
    assert summarize.calls, "the history grew past 8 messages: something was summarized"
    assert all(len(sent) <= 8 + 1 for sent in seen)  # the model never got the whole history
    assert all(orphans(sent) == [] for sent in seen)
    info = history.session.info()
    assert info is not None and info.summarized > 0
    # every original is kept, in order, each summary after the last message it stands for
    full = stored_models(history.session.history(full=True))
    assert [m for m in full if not summaries([m])] == saved
    assert len(saved) == 24 and len(full) == 24 + len(summarize.calls)
    loaded = history.load()
    assert summaries(loaded[:1]) == [f"summary of {len(summarize.calls[-1])} messages"]
    assert loaded[1:] == saved[len(saved) - len(loaded) + 1 :]
    # a later summary is given the previous one first: it stands for all of it
    assert len(summarize.calls) > 1
    assert summaries(summarize.calls[-1][:1]) == [f"summary of {len(summarize.calls[-2])} messages"]


def test_a_rollback_undoes_the_summary(store: memvault.Store) -> None:
    history = MemvaultHistory("c", store=store)
    agent = make_agent()
    for prompt in TURNS[:2]:
        result = agent.run_sync(prompt, message_history=history.load())
        history.extend(result.new_messages())
    history.session.snapshot("before")
    whole = history.load()
    summarizer = MemvaultSummarizer(history, Recorder(), max_messages=4, keep_last=2)
    summarized = make_agent([ProcessHistory(summarizer)]).run_sync("three", message_history=whole)
    assert summaries(history.load()) != []
    history.session.rollback("before")
    assert history.load() == whole
    assert summaries(summarized.new_messages()) == []


def test_an_agent_can_write_the_summary(store: memvault.Store) -> None:
    def summarizing_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"{len(messages)} messages: the user adds numbers")])

    writer = Agent(FunctionModel(summarizing_model), output_type=str)
    history = MemvaultHistory("c", store=store)
    agent = make_agent(
        [ProcessHistory(MemvaultSummarizer(history, writer, max_messages=6, keep_last=2))]
    )
    for prompt in TURNS[:2]:
        result = agent.run_sync(prompt, message_history=history.load())
        history.extend(result.new_messages())
    text = summaries(history.load())
    assert len(text) == 1 and text[0].endswith("messages: the user adds numbers")


async def test_an_async_summarizer_on_an_async_store(any_store_url: str) -> None:
    async def summarize(messages: list[ModelMessage]) -> str:
        return f"async summary of {len(messages)}"

    async with memvault.open_async(any_store_url) as store:
        history = MemvaultHistory("c", async_store=store)
        summarizer = MemvaultSummarizer(history, summarize, max_messages=6, keep_last=2)
        agent = make_agent([ProcessHistory(summarizer)])
        for prompt in TURNS[:3]:
            result = await agent.run(prompt, message_history=await history.aload())
            await history.aextend(result.new_messages())
            assert await history.aload() == result.all_messages()
        assert summaries(await history.aload())[0].startswith("async summary of")


def test_messages_saved_while_summarizing_stay_after_the_summary(store: memvault.Store) -> None:
    history, other = MemvaultHistory("c", store=store), MemvaultHistory("c", store=store)
    agent = make_agent()
    result = agent.run_sync("one")
    history.extend(result.new_messages())
    late = make_agent().run_sync("meanwhile").new_messages()

    def summarize(messages: list[ModelMessage]) -> str:
        other.extend(late)  # another worker saves a turn while the summary is written
        return "summary"

    summarizer = MemvaultSummarizer(history, summarize, max_messages=3, keep_last=1)
    agent = make_agent([ProcessHistory(summarizer)])
    mine = agent.run_sync("two", message_history=history.load())
    history.extend(mine.new_messages())
    loaded = history.load()
    assert summaries(loaded[:1]) == ["summary"]
    assert loaded[-len(late) - len(mine.new_messages()) :] == late + mine.new_messages()
    assert len(history.session.history(full=True)) == 6 + 1 + len(late) + len(mine.new_messages())


def test_a_summary_is_only_asked_for_when_it_can_be_stored(store: memvault.Store) -> None:
    history, summarize = MemvaultHistory("c", store=store), Recorder()
    history.extend(make_agent().run_sync("one").new_messages())
    summarizer = MemvaultSummarizer(history, summarize, max_messages=2, keep_last=0)
    asyncio.run(summarizer([*history.load(), ModelRequest(parts=[UserPromptPart("two")])]))
    assert len(summarize.calls) == 1
    # now the history opens with the summary and one response: nothing more to stand for
    [summary, answer] = history.load()
    again = [summary, answer, ModelRequest(parts=[UserPromptPart("three")])]
    assert asyncio.run(summarizer(again)) == again
    assert len(summarize.calls) == 1  # the summarizing model was not run for nothing


def test_what_is_not_stored_is_never_summarized(store: memvault.Store) -> None:
    history, summarize = MemvaultHistory("c", store=store), Recorder()
    summarizer = MemvaultSummarizer(history, summarize, max_messages=3, keep_last=1)
    agent = make_agent([ProcessHistory(summarizer)])
    result = agent.run_sync("one")  # nothing loaded from memvault, nothing stored
    assert summarize.calls == [] and summaries(result.all_messages()) == []
    assert store.session("c").info() is None


def test_bad_settings_are_refused() -> None:
    history = MemvaultHistory("c", store=memvault.open("memory://"))
    with pytest.raises(ConfigurationError):
        MemvaultSummarizer(history, Recorder(), max_messages=4, keep_last=4)
    with pytest.raises(ConfigurationError):
        MemvaultSummarizer(history, "not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        MemvaultSummarizer("c", Recorder())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        MemvaultSummarizer(history, Recorder(), max_messages=-1)
