"""MemvaultHistory with real pydantic-ai agents, on every registered backend.

pydantic-ai's own result is the oracle: after each turn, the history loaded back
must equal ``result.all_messages()`` exactly, through ``run_sync``, ``run`` and
``run_stream``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    DocumentUrl,
    ImageUrl,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from typer.testing import CliRunner

import memvault
from memvault import (
    ConfigurationError,
    ConflictError,
    InvalidArgumentError,
    InvalidMessageError,
    Message,
    ToolCall,
)
from memvault.cli.app import app
from memvault.integrations.pydantic_ai import (
    PAYLOAD_KEY,
    MemvaultHistory,
    UnsupportedMessageError,
)
from tests.support.pydantic_ai_agents import HOSTILE, make_agent, orphans, stored_models

PROMPTS: list[Any] = [
    "Add one and two, please.",
    [
        "What is in these? " + HOSTILE,
        ImageUrl(url="https://example.com/cat.png"),
        DocumentUrl(url="https://example.com/report.pdf"),
        BinaryImage(data=b"\x89PNG\x00\xff", media_type="image/png"),
        BinaryContent(data=b"%PDF-1.7 \x00", media_type="application/pdf"),
    ],
    "x" * 100_000,  # a huge prompt
]


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    with memvault.open(any_store_url) as store:
        yield store


@pytest.fixture
async def async_store(any_store_url: str) -> AsyncIterator[memvault.AsyncStore]:
    async with memvault.open_async(any_store_url) as store:
        yield store


def test_run_sync_turns_load_back_exactly(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("user-42 \u200f", store=store)
    for prompt in PROMPTS:
        result = agent.run_sync(prompt, message_history=history.load())
        version = history.extend(result.new_messages())
        assert history.load() == result.all_messages()
        assert version == history.version
    assert len(result.all_messages()) == 18  # 6 per turn: the tool round trips
    assert store.session("user-42 \u200f").info().length == 18  # type: ignore[union-attr]


async def test_run_and_run_stream_turns_load_back_exactly(
    async_store: memvault.AsyncStore,
) -> None:
    agent, history = make_agent(), MemvaultHistory("user-42", async_store=async_store)
    for n, prompt in enumerate(PROMPTS):
        if n % 2:
            async with agent.run_stream(prompt, message_history=await history.aload()) as run:
                await run.get_output()
            new, everything = run.new_messages(), run.all_messages()
        else:
            result = await agent.run(prompt, message_history=await history.aload())
            new, everything = result.new_messages(), result.all_messages()
        await history.aextend(new, expect_version=await history.aversion())
        assert await history.aload() == everything
    # a later object on the same store reads the same conversation
    assert await MemvaultHistory("user-42", async_store=async_store).aload() == everything


def test_a_retried_save_stores_the_run_once(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("c", store=store)
    result = agent.run_sync("hi")
    version = history.extend(result.new_messages(), expect_version=0)
    # the retry after OutcomeUnknownError: same messages, same expected version
    assert history.extend(result.new_messages(), expect_version=0) == version
    assert history.extend(list(result.new_messages())) == version
    assert history.load() == result.all_messages()
    assert [e.op for e in history.session.log()] == ["append"]


def test_a_retry_after_another_writer_appended_stores_nothing_twice(store: memvault.Store) -> None:
    agent = make_agent()
    mine, theirs = MemvaultHistory("c", store=store), MemvaultHistory("c", store=store)
    first = agent.run_sync("mine")
    mine.extend(first.new_messages())
    second = agent.run_sync("theirs")
    theirs.extend(second.new_messages())
    mine.extend(first.new_messages())  # the retry comes after their turn: found, not re-added
    assert mine.load() == first.new_messages() + second.new_messages()


def test_saving_all_messages_stores_only_the_new_ones(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("c", store=store)
    for prompt in ("one", "two", "three"):
        result = agent.run_sync(prompt, message_history=history.load())
        history.extend(result.all_messages())  # the docs' habit: the whole history each time
        assert history.load() == result.all_messages()
    assert history.extend(result.all_messages()) == history.version  # again: nothing new
    assert len(history.session.history()) == 18


def test_messages_hidden_and_saved_again_are_stored_again(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("c", store=store)
    result = agent.run_sync("hi")
    history.extend(result.new_messages())
    history.session.clear()
    history.extend(result.new_messages())
    assert history.load() == result.all_messages()


def test_expect_version_makes_the_save_compare_and_set(store: memvault.Store) -> None:
    agent = make_agent()
    alice, bob = MemvaultHistory("shared", store=store), MemvaultHistory("shared", store=store)
    start = agent.run_sync("start")
    alice.extend(start.new_messages())
    seen = alice.version
    theirs = agent.run_sync("bob's turn", message_history=bob.load())
    mine = agent.run_sync("alice's turn", message_history=alice.load())
    bob.extend(theirs.new_messages(), expect_version=seen)
    with pytest.raises(ConflictError):
        alice.extend(mine.new_messages(), expect_version=seen)
    assert alice.load() == theirs.all_messages()  # nothing of the losing turn was written
    with pytest.raises(ConflictError):
        alice.extend([], expect_version=seen)
    assert alice.extend([]) == alice.version


def test_load_last_never_cuts_a_tool_result_from_its_call(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("c", store=store)
    for prompt in ("one", "two", "three"):
        result = agent.run_sync(prompt, message_history=history.load())
        history.extend(result.new_messages())
    everything = history.load()
    cut_some = False
    for last in range(len(everything) + 2):
        window = history.load(last=last)
        assert window == everything[len(everything) - len(window) :]
        assert len(window) >= min(last, len(everything))
        assert orphans(window) == []
        if len(window) > last:  # widened: the one message before would orphan a result
            cut_some = True
            assert orphans(window[1:]) != []
    assert cut_some
    with pytest.raises(InvalidArgumentError):
        history.load(last=-1)


def test_a_window_reads_back_far_enough_for_a_distant_call(store: memvault.Store) -> None:
    call = ModelResponse(parts=[ToolCallPart("slow", {}, tool_call_id="far")])
    chatter = [ModelRequest(parts=[UserPromptPart(f"meanwhile {i}")]) for i in range(40)]
    answer = ModelRequest(parts=[ToolReturnPart("slow", "done", tool_call_id="far")])
    history = MemvaultHistory("c", store=store)
    history.extend([call, *chatter, answer])
    assert history.load(last=1) == [call, *chatter, answer]
    assert history.load(last=41)[0] == call


def test_a_message_from_a_newer_pydantic_ai_is_an_error_naming_it(store: memvault.Store) -> None:
    agent, history = make_agent(), MemvaultHistory("c", store=store)
    history.extend(agent.run_sync("hi").new_messages())
    stored = json.loads(history.session.history()[1].metadata[PAYLOAD_KEY])
    stored["parts"][0]["future_field"] = "kept by pydantic-ai 9"
    unknown_kind = {"kind": "request", "parts": [{"part_kind": "hologram", "content": "x"}]}
    for bad in (json.dumps(stored), json.dumps(unknown_kind), "{not json", "{}, {}"):
        store.session("c").append([Message.assistant("?", metadata={PAYLOAD_KEY: bad})])
        with pytest.raises(UnsupportedMessageError, match="session 'c', position 7: "):
            history.load()
        with pytest.raises(UnsupportedMessageError, match="session 'c', position 7: "):
            history.load(last=2)
        store.session("c").pop()
    assert len(history.load()) == 6


def test_a_conversation_an_older_pydantic_ai_saved_loads(store: memvault.Store) -> None:
    """tests/data/pydantic_ai_2_62_conversation.jsonl: two turns of the scripted agent
    saved by MemvaultHistory on pydantic-ai-slim 2.62.0, which wrote fewer fields
    (no ``model_id``, no ``content_file_digests``): the newer one reads them all.
    (2.62 reading what 2.68 wrote raises UnsupportedMessageError naming
    ``response.model_id``, as the test above shows for any unknown field.)"""
    lines = Path(__file__).parents[1] / "data" / "pydantic_ai_2_62_conversation.jsonl"
    saved = [json.loads(line) for line in lines.read_text(encoding="utf-8").splitlines()]
    store.session("old").append([Message(**fields) for fields in saved])
    history = MemvaultHistory("old", store=store)
    loaded = history.load()
    assert loaded == stored_models(store.session("old").history())
    assert len(loaded) == 12 and [m.kind for m in loaded[:2]] == ["request", "response"]
    result = make_agent().run_sync("three", message_history=loaded)
    history.extend(result.new_messages())
    assert history.load() == result.all_messages()


def test_the_unknown_field_is_named(store: memvault.Store) -> None:
    history = MemvaultHistory("c", store=store)
    history.extend([ModelResponse(parts=[TextPart("hi")])])
    stored = json.loads(history.session.history()[0].metadata[PAYLOAD_KEY])
    stored["parts"][0]["future_field"] = 1
    store.session("c").append([Message.assistant("hi", metadata={PAYLOAD_KEY: json.dumps(stored)})])
    with pytest.raises(UnsupportedMessageError, match=r"position 2: .*newer.*future_field"):
        history.load()


def test_messages_of_other_writers_are_read_as_model_messages(store: memvault.Store) -> None:
    store.session("c").append(
        [
            Message.system("Be brief."),
            Message.user("Add 1 and 2"),
            Message.assistant(
                None, tool_calls=[ToolCall(id="c1", name="add", arguments='{"a":1}')]
            ),
            Message.tool("3", tool_call_id="c1"),
            Message.assistant("It is 3."),
        ]
    )
    history = MemvaultHistory("c", store=store)
    loaded = history.load()
    assert loaded == history.load()  # stable: timestamps are the messages' own
    assert [type(m).__name__ for m in loaded] == ["ModelRequest"] * 2 + [
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert loaded[3].parts[0] == ToolReturnPart(
        "add", "3", tool_call_id="c1", timestamp=loaded[3].timestamp
    )
    # a window that starts at such a tool result reads back to the call that names it
    assert history.load(last=2) == loaded[2:]
    result = make_agent().run_sync("and 2 and 3?", message_history=loaded)
    history.extend(result.new_messages())  # (pydantic-ai merged system and user in its copy)
    assert history.load() == loaded + result.new_messages()
    store.session("d").append([Message.tool("3", tool_call_id="nowhere")])
    with pytest.raises(UnsupportedMessageError, match=r"session 'd', position 1: .*no name"):
        MemvaultHistory("d", store=store).load()


def test_bad_input_is_refused_with_nothing_written(store: memvault.Store) -> None:
    history = MemvaultHistory("c", store=store)
    good = ModelRequest(parts=[UserPromptPart("hi")])
    for bad in (good, "hi", [good, {"kind": "request"}], [good, None]):
        with pytest.raises(InvalidMessageError):
            history.extend(bad)  # type: ignore[arg-type]
    unserializable = ModelRequest(parts=[ToolReturnPart("t", object(), tool_call_id="x")])
    with pytest.raises(InvalidMessageError, match="message 1"):
        history.extend([good, unserializable])
    with pytest.raises(InvalidMessageError):
        history.extend([ModelRequest(parts=[UserPromptPart("lone \udc00 surrogate")])])
    assert history.version == 0 and store.session("c").info() is None


def test_values_json_cannot_carry_come_back_as_pydantic_ai_reloads_them(
    store: memvault.Store,
) -> None:
    with pytest.warns(match="RetryPromptPart` is deprecated"):
        legacy = RetryPromptPart("bad args", tool_name="add", tool_call_id="c1")
    saved = [
        ModelRequest(
            parts=[
                UserPromptPart([BinaryContent(data=b"\x89PNG", media_type="image/png")]),
                ToolReturnPart("t", b"raw bytes", tool_call_id="c1", metadata={"pair": (1, 2)}),
                ToolReturnPart("t", {"inf": float("inf")}, tool_call_id="c2"),
                legacy,
            ]
        )
    ]
    history = MemvaultHistory("c", store=store)
    history.extend(saved)
    loaded = history.load()
    assert loaded == ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(saved)
    )
    parts = loaded[0].parts
    assert isinstance(parts[0].content[0], BinaryImage)  # type: ignore[union-attr,index]
    assert parts[1].content == "cmF3IGJ5dGVz" and parts[1].metadata == {"pair": [1, 2]}  # type: ignore[union-attr]
    assert parts[2].content == {"inf": None}  # type: ignore[union-attr]
    assert parts[3] == ToolReturnPart(
        "add", "bad args", tool_call_id="c1", timestamp=legacy.timestamp, outcome="retried"
    )


def test_the_store_faces_and_urls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with MemvaultHistory.from_conn_string(url, "c", writer="w") as history:
        history.extend([ModelRequest(parts=[UserPromptPart("hi")])])
        assert history.session.log()[-1].writer == "w"
        with pytest.raises(ConfigurationError, match="async_store"):
            history.async_session  # noqa: B018
    with pytest.raises(ConfigurationError):
        MemvaultHistory("c")
    with pytest.raises(ConfigurationError):
        MemvaultHistory("c", store="sqlite:///x.db")  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError):
        MemvaultHistory("", store=memvault.open("memory://"))
    assert repr(MemvaultHistory("c", store=memvault.open("memory://"))) == "MemvaultHistory('c')"


async def test_the_async_face_from_a_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    async with MemvaultHistory.from_conn_string(url, "c") as history:
        await history.aextend([ModelRequest(parts=[UserPromptPart("hi")])])
        assert await history.aversion() == 1
        with pytest.raises(ConfigurationError, match="store="):
            history.session  # noqa: B018
    with MemvaultHistory.from_conn_string(url, "c") as history:
        assert history.load()[0].parts[0].content == "hi"  # type: ignore[union-attr]


def test_memvault_tools_read_the_role_and_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with MemvaultHistory.from_conn_string(url, "chat") as history:
        result = make_agent().run_sync("Please add the zebra numbers")
        history.extend(result.new_messages())
        stored = history.session.history()
        assert [m.role for m in stored] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        assert stored[1].tool_calls[0] == ToolCall(
            id="t1-add", name="add", arguments='{"a":1,"b":[2,3.5]}'
        )
        assert stored[2].tool_call_id == "t1-add"
        assert stored[5].content == f"turn 1 done: {HOSTILE}"
        assert [h.position for h in history.session.search("zebra")] == [1]
        # the exact pydantic-ai JSON is kept beside the view
        assert stored_models(stored) == result.all_messages()
    shown = CliRunner().invoke(app, ["show", "chat", "--url", url])
    assert shown.exit_code == 0, shown.output
    assert "user" in shown.output and "zebra numbers" in shown.output
    assert "turn 1 done" in shown.output
