"""The Message model and its codec."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any

import pytest

from memvault import CorruptRecordError, InvalidMessageError, Message, ToolCall
from memvault.messages import constructed, decode_message, encode_message, new_message_id


def test_ids_are_unique_and_time_ordered() -> None:
    ids = [new_message_id() for _ in range(20000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


def test_defaults_and_utc() -> None:
    m = Message.user("hi")
    assert m.created_at.tzinfo is timezone.utc and m.metadata == {} and m.tool_calls == ()
    naive = Message.user("x", created_at=datetime(2024, 1, 1, 12, 0))
    assert naive.created_at == datetime(2024, 1, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "fields",
    [
        {"role": "wizard", "content": "x"},
        {"role": "user", "content": "x", "metadata": {"s": {1}}},
        {"role": "user", "content": "x", "metadata": {"f": math.inf}},
        {"role": "user", "content": "x", "metadata": {1: "non-str key"}},
        {"role": "user", "content": None},
        {"role": "user", "content": "x", "tool_calls": [ToolCall(id="1", name="f")]},
        {"role": "user", "content": [{"type": "text", "x": {1, 2}}]},
    ],
)
def test_construction_validates(fields: dict[str, object]) -> None:
    """A Message validates on construction: a ValueError says what is wrong."""
    with pytest.raises(ValueError):
        Message(**fields)  # type: ignore[arg-type]


def test_assistant_with_only_tool_calls() -> None:
    m = Message.assistant(None, tool_calls=[ToolCall(id="c", name="f", arguments="{bad json")])
    assert m.content is None and m.tool_calls[0].arguments == "{bad json"


def test_messages_are_immutable() -> None:
    m = Message.user("x")
    with pytest.raises(ValueError):
        m.content = "y"  # type: ignore[misc]


def test_encoding_is_a_versioned_json_envelope() -> None:
    m = Message.user("é\x00", metadata={"k": 1})
    record = encode_message(m, 10_000)
    envelope = json.loads(record.body)
    assert envelope["v"] == 1 and envelope["m"]["content"] == "é\x00"
    assert "\x00" not in record.body  # JSON escapes NUL: safe in any text column
    assert decode_message("s", 1, record.body) == m


def test_encoding_refuses_what_json_cannot_carry() -> None:
    forged = Message.model_construct(
        id="x",
        role="user",
        content="a",
        name=None,
        tool_calls=(),
        tool_call_id=None,
        metadata={"s": {1}},
        created_at=datetime.now(timezone.utc),
    )
    with pytest.raises(InvalidMessageError):
        encode_message(forged, 10_000)
    with pytest.raises(InvalidMessageError):
        encode_message(Message.user("\udcff"), 10_000)


def test_constructed_is_model_construct() -> None:
    fields: dict[str, Any] = {
        "id": "x",
        "role": "system",
        "content": "c",
        "metadata": {"k": {"a": [1]}},
        "created_at": datetime.now(timezone.utc),
    }
    made, reference = constructed(**fields), Message.model_construct(**fields)
    assert list(made.__dict__.items()) == list(reference.__dict__.items())
    assert made.__pydantic_fields_set__ == reference.__pydantic_fields_set__
    assert (made.__pydantic_extra__, made.__pydantic_private__) == (None, None)
    assert encode_message(made, 10_000) == encode_message(reference, 10_000)


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        ({"a": [1, "x", {"b": math.nan}]}, "metadata['a'][2]['b']: nan is not a JSON number"),
        ({"a": ["x", None, True, b"y"]}, "metadata['a'][3]: bytes is not a JSON value"),
        ({"a": {"b": "c", 1: "d"}}, "metadata['a']: key 1 is not a string"),
        ({"a": {"\udcff": "c"}}, "metadata['a']: key '\\udcff' is not valid Unicode"),
    ],
)
def test_what_json_cannot_carry_is_named_where_it_is(metadata: Any, where: str) -> None:
    forged = constructed(
        id="x", role="user", content="a", metadata=metadata, created_at=datetime.now(timezone.utc)
    )
    with pytest.raises(InvalidMessageError, match=re.escape(where)):
        encode_message(forged, 10_000)


@pytest.mark.parametrize(
    "body",
    [
        "",
        "null",
        "[]",
        '{"v": 1}',
        '{"v": 2, "m": {}}',
        '{"v": 1, "m": {"role": "user"}}',
        '{"v": 1, "m": {"role": "x", "content": "a", "id": "i", '
        '"created_at": "2024-01-01T00:00:00Z"}}',
        b"\x80\x04\x95",
        '{"v": 1, "m": {}, "extra": 1}',
    ],
)
def test_decoding_is_strict(body: str | bytes) -> None:
    with pytest.raises(CorruptRecordError) as err:
        decode_message("sess", 7, body)
    assert err.value.session_id == "sess" and err.value.depth == 7
