"""Property: random histories of every pydantic-ai message and part kind round-trip.

What ``MemvaultHistory`` loads must equal pydantic-ai's own JSON round trip of
what was saved (``ModelMessagesTypeAdapter``), and the original itself for the
values that round trip keeps (every strategy below except where noted).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    BinaryImage,
    CachePoint,
    Citation,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SpeechPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
    VideoUrl,
    WebCitationSource,
)
from pydantic_ai.usage import RequestUsage

import memvault
from memvault.integrations.pydantic_ai import MemvaultHistory

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12)
maybe = st.none() | text
times = st.datetimes(timezones=st.just(timezone.utc))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
objects = st.none() | st.dictionaries(text, json_values, max_size=3)
urls = st.sampled_from(["https://example.com/a", 'https://例え.jp/ü?q="x"', "s3://b/k"])
blobs = st.binary(max_size=64)

user_content = st.one_of(
    text,
    st.builds(TextContent, text, metadata=json_values),
    st.builds(ImageUrl, urls, force_download=st.booleans(), vendor_metadata=objects),
    st.builds(AudioUrl, st.just("https://example.com/a.mp3")),
    st.builds(DocumentUrl, st.just("https://example.com/d.pdf"), identifier=maybe),
    st.builds(VideoUrl, st.just("https://example.com/v.mp4")),
    # BinaryContent of an image type reloads as BinaryImage (pydantic-ai narrows it):
    st.builds(BinaryImage, blobs, media_type=st.sampled_from(["image/png", "image/jpeg"])),
    st.builds(BinaryContent, blobs, media_type=st.sampled_from(["application/pdf", "audio/wav"])),
    st.builds(UploadedFile, names, st.sampled_from(["openai", "anthropic"])),
    st.builds(CachePoint),
)
tool_call_ids = st.text("abc-_0123", min_size=1, max_size=8)
request_parts = st.one_of(
    st.builds(SystemPromptPart, text, timestamp=times, dynamic_ref=maybe, metadata=objects),
    st.builds(UserPromptPart, text | st.lists(user_content, max_size=4), timestamp=times),
    st.builds(
        ToolReturnPart,
        names,
        json_values,
        tool_call_ids,
        metadata=json_values,
        timestamp=times,
        outcome=st.sampled_from(["success", "failed", "denied", "retried"]),
    ),
    st.builds(
        RetryFeedbackPart,
        text,
        retry=st.builds(
            RetryInfo,
            st.sampled_from(["validation_error", "no_output", "model_retry"]),
            attempt=st.none() | st.integers(0, 9),
        ),
        timestamp=times,
    ),
    st.builds(CompactionPart, text, metadata=objects),
    st.builds(
        SpeechPart,
        speaker=st.just("user"),
        transcript=maybe,
        audio=st.none() | st.builds(BinaryContent, blobs, media_type=st.just("audio/wav")),
    ),
    st.builds(
        ToolAvailabilityDeltaPart, tools_added=st.lists(names, max_size=3), tool_call_id=maybe
    ),
)
response_parts = st.one_of(
    st.builds(TextPart, text, id=maybe, provider_name=maybe, provider_details=objects),
    st.builds(
        TextPart,
        text,
        citations=st.lists(
            st.builds(
                Citation,
                st.lists(st.builds(WebCitationSource, urls, title=maybe), min_size=1, max_size=2),
            ),
            max_size=2,
        ),
    ),
    st.builds(ThinkingPart, text, id=maybe, signature=maybe, provider_name=st.just("anthropic")),
    st.builds(
        ToolCallPart,
        names,
        st.dictionaries(text, json_values, max_size=3) | text,
        tool_call_ids,
        provider_name=maybe,
    ),
    st.builds(
        NativeToolCallPart,
        st.just("web_search"),
        st.dictionaries(text, json_values, max_size=3),
        tool_call_ids,
        provider_name=st.just("openai"),
    ),
    st.builds(
        NativeToolReturnPart,
        st.just("web_search"),
        json_values,
        tool_call_ids,
        timestamp=times,
        provider_name=st.just("openai"),
    ),
    st.builds(FilePart, st.builds(BinaryImage, blobs, media_type=st.just("image/png")), id=maybe),
    st.builds(
        CompactionPart,
        maybe,
        id=names,
        provider_name=st.just("anthropic"),
        provider_details=objects,
    ),
)
usage = st.builds(
    RequestUsage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cache_read_tokens=st.integers(0, 10**4),
    details=st.dictionaries(names, st.integers(0, 10**6), max_size=2),
)
requests = st.builds(
    ModelRequest,
    st.lists(request_parts, max_size=4),
    state=st.sampled_from(["complete", "interrupted"]),
    timestamp=st.none() | times,
    instructions=maybe,
    conversation_id=maybe,
    metadata=objects,
)
responses = st.builds(
    ModelResponse,
    st.lists(response_parts, max_size=4),
    usage=usage,
    model_name=maybe,
    model_id=maybe,
    timestamp=times,
    provider_name=maybe,
    provider_url=st.none() | st.just("https://api.example.com/v1"),
    provider_details=objects,
    provider_response_id=maybe,
    finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_call"]),
    metadata=objects,
    state=st.sampled_from(["complete", "incomplete", "interrupted"]),
)
histories = st.lists(requests | responses, max_size=8)


def pydantic_ai_round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


@pytest.fixture
def store(any_store_url: str) -> Iterator[memvault.Store]:
    """One store for all the examples of a test (each example has its own session)."""
    with memvault.open(any_store_url) as store:
        yield store


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(histories, min_size=1, max_size=3))
def test_every_message_and_part_kind_round_trips(
    store: memvault.Store, batches: list[list[ModelMessage]]
) -> None:
    # each batch its own run, as every agent run is (saving a batch again is a no-op)
    batches = [[replace(m, run_id=f"run {n}") for m in batch] for n, batch in enumerate(batches)]
    history = MemvaultHistory(str(uuid.uuid4()), store=store)
    for batch in batches:
        history.extend(batch)
    saved = [m for batch in batches for m in batch]
    loaded = history.load()
    assert loaded == pydantic_ai_round_trip(saved)
    assert loaded == saved
    for last in (0, 1, 3):
        window = history.load(last=last)
        assert window == saved[len(saved) - len(window) :]
