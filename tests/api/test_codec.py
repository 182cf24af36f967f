"""The stored envelope: what memvault writes reads back exactly, bodies written by
earlier releases still read, and anything else is a CorruptRecordError."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault import Message, ToolCall
from memvault.errors import CorruptRecordError, InvalidMessageError
from memvault.messages import MAX_NESTING, decode_message, encode_message

LIMIT = 4 * 1024 * 1024
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | text
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=text | st.lists(st.dictionaries(text, json_values, max_size=3), max_size=3),
    name=st.none() | text,
    metadata=st.dictionaries(text, json_values, max_size=4),
    created_at=st.datetimes(timezones=st.just(timezone.utc)),
)


def legacy_body(m: Message) -> str:
    """The envelope exactly as memvault 0.1.0 wrote it."""
    return json.dumps(
        {"v": 1, "m": m.model_dump(mode="json")},
        ensure_ascii=False,
        allow_nan=False,
        separators=(",", ":"),
    )


@settings(max_examples=200, deadline=None)
@given(messages)
def test_round_trip_is_exact(m: Message) -> None:
    assert decode_message("s", 1, encode_message(m, LIMIT).body) == m


@settings(max_examples=200, deadline=None)
@given(messages)
def test_bodies_written_by_earlier_releases_read_the_same(m: Message) -> None:
    assert decode_message("s", 1, legacy_body(m)) == m


def test_tool_calls_and_timestamps_read_back_exactly() -> None:
    call = ToolCall(id="c1", name="search", arguments='{"q": "x",  "n":1.50}')
    m = Message.assistant(
        None, tool_calls=[call], created_at=datetime(2024, 5, 1, 12, 0, 0, 123456)
    )
    back = decode_message("s", 1, encode_message(m, LIMIT).body)
    assert back == m and back.tool_calls[0].arguments == '{"q": "x",  "n":1.50}'
    assert back.created_at.tzinfo is timezone.utc


GOOD = {"id": "a", "role": "user", "content": "x", "created_at": "2024-01-01T00:00:00Z"}


def envelope(m: object = GOOD, v: str = "1", extra: str = "") -> str:
    return f'{{"v":{v},"m":{json.dumps(m)}{extra}}}'


@pytest.mark.parametrize("version", ["1", "1.0", "true"])
def test_envelope_version_one_in_any_json_spelling_reads(version: str) -> None:
    body = envelope(v=version)
    assert decode_message("s", 1, body) == Message.model_validate(GOOD)


NESTED: object = []
for _ in range(MAX_NESTING + 1):
    NESTED = [NESTED]


@pytest.mark.parametrize(
    "fields",
    [
        {**GOOD, "created_at": "2024-01-01T02:00:00+02:00"},
        {**GOOD, "created_at": "2024-01-01T00:00:00"},
        {**GOOD, "content": [{"type": "text", "text": "x"}], "metadata": {"k": [1, {"x": None}]}},
        {
            "id": "a",
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "name": "f"}],
            "created_at": "2024-01-01T00:00:00.5Z",
        },
    ],
)
def test_a_stored_message_reads_as_message_validates_it(fields: dict[str, object]) -> None:
    """Failing: a read that skips a conversion of Message's (times to UTC) or builds
    another object than validation would."""
    back = decode_message("s", 1, envelope(fields))
    want = Message.model_validate(fields)
    assert back == want and back.created_at.tzinfo is timezone.utc
    assert back.model_fields_set == want.model_fields_set and repr(back) == repr(want)


@pytest.mark.parametrize(
    "body",
    [
        envelope(v='"1"'),
        envelope(v="2"),
        envelope(extra=',"x":0'),
        '{"v":1}',
        envelope() + " trailing",
        envelope({**GOOD, "role": "robot"}),
        envelope({**GOOD, "metadata": {"a": float("nan")}}),
        envelope({**GOOD, "metadata": {"a": float("inf")}}),
        envelope({**GOOD, "extra": 1}),
        # what Message's own validators check, beyond the field types
        envelope({**GOOD, "content": None}),
        envelope({**GOOD, "tool_calls": [{"id": "c", "name": "f"}]}),
        envelope({**GOOD, "content": [{"x": float("nan")}]}),
        envelope({**GOOD, "metadata": {"deep": NESTED}}),
        b'{"v":1,"m":{"id":"a","role":"user","content":"\xff"}}',
        "",
    ],
)
def test_anything_else_is_a_corrupt_record(body: str | bytes) -> None:
    with pytest.raises(CorruptRecordError) as err:
        decode_message("victim", 7, body)
    assert err.value.session_id == "victim" and err.value.depth == 7


@pytest.mark.parametrize(
    "update", [{"metadata": {"a": float("nan")}}, {"content": [{"x": float("inf")}]}]
)
def test_a_message_that_skipped_validation_cannot_store_a_non_json_number(
    update: dict[str, object],
) -> None:
    """model_copy(update=...) skips validation: the NaN must still be refused, not
    stored as null."""
    m = Message.user("x").model_copy(update=update)
    with pytest.raises(InvalidMessageError):
        encode_message(m, LIMIT)
