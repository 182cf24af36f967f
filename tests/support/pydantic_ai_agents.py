"""A pydantic-ai agent that needs no network: a FunctionModel scripted to use tools.

Each user turn makes the model call two tools in parallel (``add`` with dict
arguments, ``shout`` with a JSON string), ``flaky`` retries once, and when the
results are in, the model answers with thinking (signed), text, usage and provider
details. Text is hostile on purpose: NUL, RTL marks, emoji, quotes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

HOSTILE = "NUL\x00 RTL\u200f emoji\U0001f600 quotes'\" {braces} \\back"


def _user_turns(messages: list[ModelMessage]) -> int:
    return sum(
        isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        for m in messages
    )


def _calls(messages: list[ModelMessage]) -> list[ToolCallPart]:
    """The tool calls for the newest user turn, or [] once its results are in."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        retried = [
            p for p in last.parts if isinstance(p, ToolReturnPart) and p.outcome == "retried"
        ]
        return [
            ToolCallPart(p.tool_name, {"n": 2}, tool_call_id=p.tool_call_id + "-again")
            for p in retried
        ]
    turn = _user_turns(messages)
    return [
        ToolCallPart("add", {"a": turn, "b": [2, 3.5]}, tool_call_id=f"t{turn}-add"),
        ToolCallPart("shout", json.dumps({"text": HOSTILE}), tool_call_id=f"t{turn}-shout"),
        ToolCallPart("flaky", {"n": 1}, tool_call_id=f"t{turn}-flaky"),
    ]


def _answer(messages: list[ModelMessage]) -> str:
    return f"turn {_user_turns(messages)} done: {HOSTILE}"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    calls = _calls(messages)
    parts: list[Any] = (
        calls
        if calls
        else [
            ThinkingPart("weighing the sums", signature="sig-\u00e9", provider_name="scripted"),
            TextPart(_answer(messages)),
        ]
    )
    return ModelResponse(
        parts=parts,
        usage=RequestUsage(input_tokens=len(messages), output_tokens=7),
        model_name="scripted-1",
        provider_details={"finish": "stop", "nested": {"k": [1, None, "\u200f"]}},
    )


async def streamed(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    calls = _calls(messages)
    if calls:
        yield {
            i: DeltaToolCall(
                name=c.tool_name, json_args=c.args_as_json_str(), tool_call_id=c.tool_call_id
            )
            for i, c in enumerate(calls)
        }
        return
    text = _answer(messages)
    for i in range(0, len(text), 7):
        yield text[i : i + 7]


def orphans(messages: list[ModelMessage]) -> list[str]:
    """Tool results whose call no earlier response in ``messages`` holds."""
    called: set[str] = set()
    lost = []
    for m in messages:
        for p in m.parts:
            if isinstance(m, ModelResponse) and isinstance(p, ToolCallPart):
                called.add(p.tool_call_id)
            elif isinstance(p, ToolReturnPart) and p.tool_call_id not in called:
                lost.append(p.tool_call_id)
    return lost


def stored_models(stored: list[Any]) -> list[ModelMessage]:
    """The ModelMessages memvault messages hold, read with pydantic-ai's own adapter."""
    return ModelMessagesTypeAdapter.validate_json(
        "[" + ",".join(str(m.metadata["pydantic_ai"]) for m in stored) + "]"
    )


def make_agent(capabilities: Sequence[Any] = (), seen: list[Any] | None = None) -> Agent[None, str]:
    """The scripted agent; ``seen`` collects the messages each model request was sent."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(list(messages))
        return scripted(messages, info)

    agent = Agent(
        FunctionModel(model, stream_function=streamed),
        instructions="Add numbers.",
        capabilities=list(capabilities),
    )

    @agent.tool_plain
    def add(a: int, b: list[float]) -> dict[str, Any]:
        return {"sum": a + sum(b), "terms": [a, *b], "note": None}

    @agent.tool_plain
    def shout(text: str) -> str:
        return text.upper()

    @agent.tool_plain
    def flaky(n: int) -> int:
        if n == 1:
            raise ModelRetry(f"n must be 2 {HOSTILE}")
        return n * 10

    del add, shout, flaky  # registered on the agent
    return agent
