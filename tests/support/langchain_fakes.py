"""Hypothesis strategies for every LangChain message type, with every field filled."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk

from tests.support.json_data import json_objects, json_values, short_text, text, unique_ids

maybe_text = st.none() | text
content = text | st.lists(
    text
    | st.builds(
        lambda kind, rest: {**rest, "type": kind},
        st.sampled_from(["text", "image_url", "custom"]),
        json_objects,
    ),
    max_size=3,
)
common = {
    "content": content,
    "id": maybe_text,
    "name": maybe_text,
    "additional_kwargs": json_objects,
    "response_metadata": json_objects,
}
tokens = st.integers(min_value=0, max_value=10**9)
usage = st.none() | st.fixed_dictionaries(
    {"input_tokens": tokens, "output_tokens": tokens, "total_tokens": tokens},
    optional={
        "input_token_details": st.fixed_dictionaries(
            {}, optional={"audio": tokens, "cache_read": tokens}
        ),
        "output_token_details": st.fixed_dictionaries({}, optional={"reasoning": tokens}),
    },
)
tool_calls = st.lists(st.builds(tool_call, name=text, args=json_objects, id=maybe_text), max_size=2)
invalid_calls = st.lists(
    st.builds(invalid_tool_call, name=maybe_text, args=maybe_text, id=maybe_text, error=maybe_text),
    max_size=2,
)
call_chunks = st.lists(
    st.builds(
        tool_call_chunk,
        name=maybe_text,
        args=maybe_text,
        id=maybe_text,
        index=st.none() | st.integers(0, 5),
    ),
    max_size=2,
)
ai = {
    **common,
    "tool_calls": tool_calls,
    "invalid_tool_calls": invalid_calls,
    "usage_metadata": usage,
}
tool = {
    **common,
    "tool_call_id": text,
    "artifact": json_values,
    "status": st.sampled_from(["success", "error"]),
}

messages: st.SearchStrategy[BaseMessage] = st.one_of(
    st.builds(HumanMessage, **common),
    st.builds(HumanMessageChunk, **common),
    st.builds(SystemMessage, **common),
    st.builds(SystemMessageChunk, **common),
    st.builds(AIMessage, **ai),
    st.builds(
        AIMessageChunk, **{**common, "tool_call_chunks": call_chunks, "usage_metadata": usage}
    ),
    st.builds(ToolMessage, **tool),
    st.builds(ToolMessageChunk, **tool),
    st.builds(FunctionMessage, **{**common, "name": text}),
    st.builds(FunctionMessageChunk, **{**common, "name": text}),
    st.builds(ChatMessage, **common, role=short_text),
    st.builds(ChatMessageChunk, **common, role=short_text),
)


def _put_id(message: BaseMessage, new: str) -> BaseMessage:
    return message.model_copy(update={"id": new})


message_lists = st.lists(messages, max_size=8).map(
    lambda ms: unique_ids(ms, lambda m: m.id, _put_id)
)


def same(got: Any, want: Any) -> bool:
    """Equal, of the same class, and serializing to the same dict."""
    from langchain_core.messages import message_to_dict

    return type(got) is type(want) and got == want and message_to_dict(got) == message_to_dict(want)
