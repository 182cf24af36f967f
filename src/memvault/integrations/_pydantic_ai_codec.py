"""pydantic-ai messages as memvault messages, and back; no I/O (see ``pydantic_ai``).

One ``ModelMessage`` (a ``ModelRequest`` or a ``ModelResponse``) is one memvault
:class:`~memvault.Message`:

- ``metadata["pydantic_ai"]`` holds the message's JSON text exactly as
  ``ModelMessagesTypeAdapter`` writes it (``dump_json``). Reading validates that text
  with the same types, so a message comes back as pydantic-ai's own JSON round trip
  gives it: equal to the original for everything an agent produces (every part kind,
  multimodal content, usage, provider details, timestamps, run ids), and for values
  JSON has no form for (a tool returning bytes or a tuple), as pydantic-ai itself
  reloads them. Validation forbids unknown fields: a message a newer pydantic-ai wrote
  with a field this one does not have is refused, never read with that field dropped.
- The native fields are a view for memvault's own tools (``show``, ``search``, the
  inspector) and other readers: a request is a ``user`` turn when it holds a user
  prompt, else a ``tool`` turn when it answers tool calls, else ``system``; a
  response is an ``assistant`` turn with its text and its tool calls as
  :class:`~memvault.ToolCall` (arguments as JSON text).

Messages written by other writers (memvault's API, another adapter) carry no
pydantic-ai JSON; they are read as the message their native fields describe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import pydantic
import pydantic_core
from pydantic_ai import __version__ as PYDANTIC_AI_VERSION
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from memvault.errors import InvalidMessageError
from memvault.integrations._common import text_of
from memvault.messages import Message, ToolCall, constructed

PAYLOAD_KEY = "pydantic_ai"

# ModelMessagesTypeAdapter's own types and settings, with unknown fields refused: its
# dataclasses take their config from the adapter, so this is the one difference.
_STRICT: pydantic.TypeAdapter[list[ModelMessage]] = pydantic.TypeAdapter(
    list[ModelMessage],
    config=pydantic.ConfigDict(
        defer_build=True, ser_json_bytes="base64", val_json_bytes="base64", extra="forbid"
    ),
)


def checked_batch(messages: object) -> list[ModelMessage]:
    """``messages`` as a list of ModelMessage, or InvalidMessageError saying what it is."""
    if isinstance(messages, (ModelRequest, ModelResponse, str, bytes)) or not isinstance(
        messages, Sequence
    ):
        raise InvalidMessageError(
            "extend takes a list of ModelMessage (result.new_messages()), "
            f"not a {type(messages).__name__}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, (ModelRequest, ModelResponse)):
            raise InvalidMessageError(
                f"message {i} is a {type(message).__name__}, not a ModelRequest or ModelResponse"
            )
    return list(messages)


def payload(message: ModelMessage, index: int) -> str:
    """The message's JSON text, as ``ModelMessagesTypeAdapter.dump_json`` writes it."""
    try:
        text = ModelMessagesTypeAdapter.dump_json([message]).decode()
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise InvalidMessageError(f"message {index} cannot be serialized: {exc}") from exc
    return text[1:-1]  # the one element of "[...]"


def key(text: str) -> str:
    """The memvault id a message's JSON text maps to: a retried save maps to the same."""
    return "pai:" + hashlib.sha256(text.encode()).hexdigest()[:48]


def to_message(message: ModelMessage, text: str, message_id: str) -> Message:
    """The memvault message storing ``message`` (its JSON ``text``) under ``message_id``.

    Built without pydantic's validation: the append checks it as it encodes it
    (:func:`memvault.messages.encode_message`), once instead of twice."""
    fields: dict[str, Any]
    if isinstance(message, ModelResponse):
        calls = tuple(
            ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
            for p in message.parts
            if isinstance(p, BaseToolCallPart) and not isinstance(p, NativeToolCallPart)
        )
        text_parts = [p.content for p in message.parts if isinstance(p, TextPart)]
        content = "\n\n".join(text_parts) if text_parts or not calls else None
        fields = {"role": "assistant", "content": content, "tool_calls": calls}
    else:
        returns = [c for c in map(_answered, message.parts) if c is not None]
        if any(isinstance(p, UserPromptPart) for p in message.parts):
            role = "user"
        elif returns:
            role = "tool"
        else:
            role = "system"
        fields = {
            "role": role,
            "content": "\n\n".join(t for t in map(_text, message.parts) if t),
            "tool_call_id": returns[0] if role == "tool" else None,
        }
    return constructed(
        id=message_id, metadata={PAYLOAD_KEY: text}, created_at=datetime.now(timezone.utc), **fields
    )


def _text(part: Any) -> str:
    """The text a request part shows in memvault's tools."""
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return part.content
        return "".join(
            c if isinstance(c, str) else c.content if isinstance(c, TextContent) else ""
            for c in part.content
        )
    if isinstance(part, BaseToolReturnPart):
        return part.model_response_str()
    if isinstance(part, (SystemPromptPart, CompactionPart, RetryPromptPart)):
        return part.content if isinstance(part.content, str) else ""
    return ""


def _answered(part: Any) -> str | None:
    """The call id a request part answers (or retries), so needs that call; else None."""
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id
    return part.tool_call_id if isinstance(part, BaseToolReturnPart) else None


class Undecodable(Exception):
    """A stored message this pydantic-ai cannot read: ``index`` in the list read.

    ``unnamed`` is set for another writer's tool result whose tool name is neither
    its own nor its call's among the messages read: reading further back may find it.
    """

    def __init__(self, index: int, reason: str, *, unnamed: bool = False) -> None:
        super().__init__(reason)
        self.index, self.reason, self.unnamed = index, reason, unnamed


def decode(stored: Sequence[Message]) -> list[ModelMessage]:
    """The ModelMessages ``stored`` holds, oldest first.

    Raises:
        Undecodable: a message this pydantic-ai cannot read (the first one).
    """
    texts = [(i, m.metadata.get(PAYLOAD_KEY)) for i, m in enumerate(stored)]
    carried = [(i, t) for i, t in texts if isinstance(t, str)]
    models: list[ModelMessage | None] = [None] * len(stored)
    if carried:
        for (i, _), model in zip(carried, _validate(carried), strict=True):
            models[i] = model
    names = _call_names(stored)
    return [
        model if model is not None else native(m, names, i)
        for i, (m, model) in enumerate(zip(stored, models, strict=True))
    ]


def _validate(carried: list[tuple[int, str]]) -> list[ModelMessage]:
    """Validate the JSON texts in one call; on failure, find the first bad one."""
    try:
        models = _STRICT.validate_json("[" + ",".join(t for _, t in carried) + "]")
    except pydantic.ValidationError:
        models = []
    if len(models) == len(carried):
        return models
    for i, text in carried:  # one of them is bad (or not one JSON value): say which
        try:
            _STRICT.validate_json("[" + text + "]")
        except pydantic.ValidationError as exc:
            raise Undecodable(i, _describe(exc)) from exc
    raise Undecodable(carried[0][0], "the stored JSON texts are not one message each")


def _describe(exc: pydantic.ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"][1:]) or "message"
    newer = (
        " (written by a newer pydantic-ai?)"
        if first["type"] in ("unexpected_keyword_argument", "extra_forbidden", "union_tag_invalid")
        else ""
    )
    return f"pydantic-ai {PYDANTIC_AI_VERSION} cannot read it{newer}: {where}: {first['msg']}" + (
        f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    )


def _call_names(stored: Iterable[Message]) -> dict[str, str]:
    return {call.id: call.name for m in stored for call in m.tool_calls}


def native(message: Message, names: dict[str, str], index: int) -> ModelMessage:
    """The ModelMessage a message without pydantic-ai JSON describes (another writer's).

    Its timestamps are the message's ``created_at``, so reading it twice gives equal
    messages; a tool result takes its tool name from ``name``, else from the call it
    answers among the messages read.
    """
    at = message.created_at
    text = text_of(message.content)
    if message.role == "assistant":
        parts: list[Any] = [TextPart(text)] if text or not message.tool_calls else []
        parts += [ToolCallPart(c.name, c.arguments, tool_call_id=c.id) for c in message.tool_calls]
        return ModelResponse(parts=parts, timestamp=at)
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        name = message.name or names.get(call_id)
        if name is None:
            raise Undecodable(
                index, "a tool result with no name and no call among those read", unnamed=True
            )
        part: Any = ToolReturnPart(name, text, tool_call_id=call_id, timestamp=at)
    elif message.role == "user":
        part = UserPromptPart(text, timestamp=at)
    else:  # system, developer
        part = SystemPromptPart(text, timestamp=at)
    return ModelRequest(parts=[part], timestamp=at)


def whole_window(messages: Sequence[ModelMessage], want: int, complete: bool) -> int | None:
    """Where a window of the newest messages must start so no tool result loses its call.

    ``want`` is the index the window would start at (``len - last``, or 0); the answer
    is at most ``want``: the window is moved back to the response holding each call
    that a result in it answers. None when that call is before ``messages[0]`` and
    ``complete`` is False (older messages exist: read more). A result whose call is
    nowhere (``complete``) is left as it is: pydantic-ai repairs it.
    """
    start, lost = want, set[str]()
    while True:
        needed = _orphans(messages, start) - lost
        if not needed:
            return start
        found: dict[str, int] = {}  # each call id's newest call before the window
        for i in range(start - 1, -1, -1):
            message = messages[i]
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, BaseToolCallPart) and part.tool_call_id in needed:
                        found.setdefault(part.tool_call_id, i)
            if len(found) == len(needed):
                break
        if len(found) < len(needed) and not complete:
            return None
        lost |= needed - found.keys()  # orphans in the stored history itself
        start = min(found.values(), default=start)


def _orphans(messages: Sequence[ModelMessage], start: int) -> set[str]:
    """Call ids answered in ``messages[start:]`` before any call of that id there."""
    called: set[str] = set()
    missing: set[str] = set()
    for message in messages[start:]:
        for part in message.parts:
            if isinstance(message, ModelResponse):
                if isinstance(part, BaseToolCallPart):
                    called.add(part.tool_call_id)
            elif (answered := _answered(part)) is not None and answered not in called:
                missing.add(answered)
    return missing
