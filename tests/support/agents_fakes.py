"""OpenAI Agents SDK test doubles: a scripted model and a strategy for every item kind.

The item strategy is derived from the SDK's own ``TResponseInputItem`` union of
TypedDicts, so an item kind the SDK adds later is generated without a change here.
"""

from __future__ import annotations

import typing
from typing import Any

import typing_extensions as te
from agents.items import ModelResponse, TResponseInputItem
from agents.models.interface import Model
from agents.usage import Usage
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from tests.support.json_data import json_objects, json_values, short_text, text, unique_ids


class ScriptedModel(Model):
    """A Model that answers each call with the next scripted list of output items,
    and records the input it was given (no network)."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,  # noqa: A002
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def say(item_id: str, words: str) -> ResponseOutputMessage:
    """An assistant text output item."""
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=words, annotations=[])],
    )


def call(item_id: str, call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    """A function call output item."""
    return ResponseFunctionToolCall(
        id=item_id, call_id=call_id, type="function_call", name=name, arguments=arguments
    )


def think(item_id: str, words: str) -> ResponseReasoningItem:
    """A reasoning output item."""
    return ResponseReasoningItem(
        id=item_id, type="reasoning", summary=[Summary(type="summary_text", text=words)]
    )


_cache: dict[Any, st.SearchStrategy[Any]] = {}


def _from_type(tp: Any) -> st.SearchStrategy[Any]:
    """JSON data of type ``tp`` (a TypedDict, Literal, Union, list, ...)."""
    if tp in _cache:
        return _cache[tp]
    origin, args = te.get_origin(tp), te.get_args(tp)
    strategy: st.SearchStrategy[Any]
    if origin in (typing.Literal, te.Literal):
        strategy = st.sampled_from(args)
    elif origin is typing.Union:
        strategy = st.one_of([_from_type(a) for a in args])
    elif origin in (list, typing.Iterable, typing.Sequence) or _is_abc(
        origin, "Iterable", "Sequence"
    ):
        strategy = st.lists(st.deferred(lambda: _from_type(args[0])), max_size=2)
    elif origin is dict:
        strategy = st.dictionaries(short_text, json_values, max_size=2)
    elif te.is_typeddict(tp):
        _cache[tp] = st.deferred(lambda: _typed_dict(tp))
        return _cache[tp]
    else:
        strategy = {
            str: text,
            int: st.integers(),
            float: st.floats(allow_nan=False, allow_infinity=False),
            bool: st.booleans(),
            type(None): st.none(),
        }.get(tp, json_values)
    _cache[tp] = strategy
    return strategy


def _is_abc(origin: Any, *names: str) -> bool:
    return getattr(origin, "__module__", "") == "collections.abc" and origin.__name__ in names


def _typed_dict(tp: Any) -> st.SearchStrategy[dict[str, Any]]:
    hints = te.get_type_hints(tp)
    required = sorted(tp.__required_keys__)
    optional = sorted(tp.__optional_keys__)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        keys = required + [k for k in optional if draw(st.booleans())]
        keys = draw(st.permutations(keys))  # key order must survive too
        return {k: draw(_from_type(hints[k])) for k in keys}

    return build()


def _unknown_kind() -> st.SearchStrategy[dict[str, Any]]:
    """An item of a kind this SDK version does not know yet."""
    return st.builds(
        lambda kind, rest: {"type": f"future_{kind}", **rest}, short_text, json_objects
    )


items: st.SearchStrategy[dict[str, Any]] = st.one_of(
    [_typed_dict(kind) for kind in te.get_args(TResponseInputItem)] + [_unknown_kind()]
)


def _put_id(item: dict[str, Any], new: str) -> dict[str, Any]:
    return {**item, "id": new}


item_lists = st.lists(items, max_size=8).map(
    lambda xs: unique_ids(xs, lambda i: i.get("id"), _put_id)
)

#: (name, strategy) for each item kind of the union, to cover every one of them.
kinds: list[tuple[str, st.SearchStrategy[dict[str, Any]]]] = [
    (kind.__name__, _typed_dict(kind)) for kind in te.get_args(TResponseInputItem)
]
