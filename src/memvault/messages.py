"""Messages and the JSON codec that stores them.

A stored message is a versioned JSON envelope, ``{"v": 1, "m": {...}}``, encoded as
UTF-8 text. Decoding is strict: anything that is not a valid envelope of a known
version raises :class:`~memvault.errors.CorruptRecordError`; it never turns into a
shorter history. Pickle is never used.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, NamedTuple, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from memvault.errors import CorruptRecordError, DuplicateMessageError, InvalidMessageError
from memvault.model import MAX_MESSAGE_ID

Role = Literal["system", "developer", "user", "assistant", "tool"]
FORMAT_VERSION = 1

_id_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_message_id() -> str:
    """Return a new UUIDv7-style id: time-ordered, unique, stable once assigned.

    Ids made in one process are strictly increasing, even within one millisecond.
    """
    global _last_ms, _seq
    with _id_lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, int.from_bytes(os.urandom(2), "big") & 0x3FF
        else:
            _seq += 1
            if _seq > 0xFFF:  # 4096 ids in one millisecond: borrow the next one
                _last_ms, _seq = _last_ms + 1, 0
        rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (_last_ms << 80) | (0x7 << 76) | (_seq << 64) | (0b10 << 62) | rand
    return str(uuid.UUID(int=value))


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


MAX_NESTING = 100
"""The deepest nesting of lists and objects in a message's ``metadata`` or ``content``
(the message's own envelope adds a few levels; readers' JSON parsers stop at ~250)."""


def _check_json(value: Any, where: str) -> None:
    """Reject anything that JSON cannot carry exactly (sets, bytes, NaN, non-str keys,
    keys with a lone surrogate, nesting deeper than :data:`MAX_NESTING`)."""
    problem = _json_problem(value, MAX_NESTING)
    if problem is not None:
        raise ValueError(f"{where}{problem}")


def _json_problem(value: Any, room: int) -> str | None:
    """Where and why ``value`` is not JSON (e.g. ``"['k'][0]: nan is not a JSON number"``);
    ``room`` is how many more levels of lists and objects may nest.

    Every message is checked on construction and again when read back, so the path is
    built only on failure, and a dict is tested before the (slower) Mapping ABC.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f": {value!r} is not a JSON number"
    if isinstance(value, (list, tuple, dict, Mapping)) and room == 0:
        return f": nested more than {MAX_NESTING} levels deep"
    # Items of the types that are JSON at any depth are not recursed into (most are).
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if type(item) not in _LEAVES and (problem := _json_problem(item, room - 1)):
                return f"[{i}]{problem}"
        return None
    if isinstance(value, (dict, Mapping)):
        for key, item in value.items():
            if not isinstance(key, str):
                return f": key {key!r} is not a string"
            if not key.isascii() and not encodable(key):
                return f": key {key!r} is not valid Unicode (lone surrogate)"
            if type(item) not in _LEAVES and (problem := _json_problem(item, room - 1)):
                return f"[{key!r}]{problem}"
        return None
    return f": {type(value).__name__} is not a JSON value"


_LEAVES = frozenset({str, int, bool, type(None)})


def encodable(text: str) -> bool:
    """Whether ``text`` has no lone surrogate (UTF-8 can carry it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def describe(exc: ValidationError) -> str:
    """Pydantic's errors on one line: ``role: Input should be 'system', ...; content: ...``."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors()
    )


_M = TypeVar("_M", bound="_Model")


class _Model(BaseModel):
    """A model whose construction errors are InvalidMessageError (pydantic's error is
    the ``__cause__``), so they stay in memvault's tree."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidMessageError(f"invalid {type(self).__name__}: {describe(exc)}") from exc

    @classmethod
    def model_validate(cls: type[_M], obj: Any, *args: Any, **kwargs: Any) -> _M:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise InvalidMessageError(f"invalid {cls.__name__}: {describe(exc)}") from exc


class ToolCall(_Model):
    """A tool call requested by an assistant message.

    Attributes:
        id: the call id the tool's answer refers to (``Message.tool_call_id``).
        name: the tool's name.
        arguments: the arguments as the JSON text the model emitted, kept exactly.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: str
    name: str
    arguments: str = "{}"


class Message(_Model):
    """One turn of a conversation. Immutable; validated on construction.

    Attributes:
        id: stable, time-ordered id; generated when not given. Appending a message
            whose id is already stored is a no-op (idempotent retries).
        role: ``system``, ``developer``, ``user``, ``assistant`` or ``tool``.
        content: text, a list of JSON content parts, or ``None`` for an assistant
            turn that only carries tool calls.
        name: optional participant name.
        tool_calls: calls requested by an assistant turn.
        tool_call_id: for a ``tool`` message, the call it answers.
        metadata: free-form JSON values.
        created_at: UTC timestamp (a naive datetime is taken as UTC).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=new_message_id, min_length=1, max_length=MAX_MESSAGE_ID)
    role: Role
    content: str | list[dict[str, JsonValue]] | None = None
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=_utcnow)

    @field_validator("content", mode="before")
    @classmethod
    def _content_is_json(cls, value: Any) -> Any:
        if isinstance(value, list):
            _check_json(value, "content")
        elif value is not None and not isinstance(value, str):
            raise ValueError("content must be a string, a list of JSON parts, or None")
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_is_json(cls, value: Any) -> Any:
        if not isinstance(value, (dict, Mapping)):
            raise ValueError("metadata must be a mapping of JSON values")
        _check_json(value, "metadata")
        return value

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content may be None only for an assistant turn with tool_calls")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        return self

    @classmethod
    def system(cls, content: str, **fields: Any) -> Message:
        """A system message."""
        return cls(role="system", content=content, **fields)

    @classmethod
    def developer(cls, content: str, **fields: Any) -> Message:
        """A developer message."""
        return cls(role="developer", content=content, **fields)

    @classmethod
    def user(cls, content: str | list[dict[str, JsonValue]], **fields: Any) -> Message:
        """A user message."""
        return cls(role="user", content=content, **fields)

    @classmethod
    def assistant(
        cls,
        content: str | list[dict[str, JsonValue]] | None = None,
        *,
        tool_calls: Sequence[ToolCall] = (),
        **fields: Any,
    ) -> Message:
        """An assistant message, optionally carrying tool calls."""
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls), **fields)

    @classmethod
    def tool(
        cls, content: str | list[dict[str, JsonValue]], *, tool_call_id: str, **fields: Any
    ) -> Message:
        """A tool result answering ``tool_call_id``."""
        return cls(role="tool", content=content, tool_call_id=tool_call_id, **fields)


class Record(NamedTuple):
    """A message encoded for storage: its id, its envelope text and that text's size
    in UTF-8 bytes; with an embedder, its search vector (text key, float32 bytes),
    which the backend stores in the same step (:mod:`memvault.vectors`). A named
    tuple: every message appended makes one (0.22 µs; a frozen dataclass took 0.48)."""

    id: str
    body: str
    size: int
    vector: tuple[str, bytes] | None = None


MessageLike = Message | Mapping[str, Any]
_ENVELOPE_START = b'{"v":%d,"m":' % FORMAT_VERSION


def encode_message(message: MessageLike, max_bytes: int) -> Record:
    """Validate and encode one message, or raise InvalidMessageError.

    A :class:`Message` object is checked again whatever produced it:
    ``model_construct`` and ``model_copy(update=...)`` skip pydantic's validation, and
    what they make (an unknown role, an empty id, ``content=42``) would be stored,
    acknowledged, and then break every read of the session. The encoded envelope is
    parsed back as a reader will, so nothing is stored that cannot be read, unless
    its fields are of the plain types validation gives them (:func:`_plain`): then
    it decodes as it was, and parsing it again would only cost (9 µs a message).

    Args:
        message: a Message, or a mapping of Message fields.
        max_bytes: the largest encoded size accepted.
    """
    try:
        from_mapping = not isinstance(message, Message)
        if not isinstance(message, Message):  # validated here, so not parsed back below
            message = Message.model_validate(message)
        # Checked again for an object that skipped validation: pydantic would write a
        # NaN there as null and a lone surrogate in a key as U+FFFD (an empty dict,
        # the usual metadata, has nothing to check).
        metadata = message.metadata
        if metadata or type(metadata) is not dict:
            _check_json(metadata, "metadata")
        if isinstance(message.content, list):
            _check_json(message.content, "content")
        # pydantic-core writes the JSON of json.dumps(model_dump(mode="json"),
        # ensure_ascii=False, compact separators) straight to UTF-8, several times
        # faster; a lone surrogate fails here (PydanticSerializationError is a ValueError).
        body = (
            _ENVELOPE_START
            + message.__pydantic_serializer__.to_json(message, warnings=False)
            + b"}"
        )
        if not from_mapping and not _plain(message):  # read back as a reader will,
            message = _checked(body) or Message.model_validate(json.loads(body)["m"])
    except InvalidMessageError:
        raise
    except (ValidationError, ValueError, TypeError, AttributeError) as exc:
        raise InvalidMessageError(f"invalid message: {exc}") from exc
    if len(body) > max_bytes:
        raise InvalidMessageError(
            f"message {message.id!r} is {len(body)} bytes encoded; the limit is {max_bytes}"
        )
    return Record(message.id, body.decode("utf-8"), len(body))


_ROLES = frozenset(get_args(Role))
_OPTIONAL_TEXT = (str, type(None))
_FIELD_COUNT = len(Message.model_fields)


def _plain(message: Message) -> bool:
    """Whether a Message's fields are exactly of the types its validation makes
    (``str``, not a subclass; a ``tuple`` of ToolCalls of ``str``s; UTC datetimes)
    and pass its own validators' checks, its metadata and list content having passed
    ``_check_json``: its envelope then decodes to it. Anything else (a field a
    ``model_construct`` or ``model_copy(update=...)`` left of another type) is
    decided by reading the envelope back. Written as flat tests, most common case
    first: 1.0 µs a message, against 2.2 µs for the same tests as one expression
    (0.43 µs since the field count is a constant: ``Message.model_fields`` is a
    class property, 0.37 µs a read)."""
    fields = message.__dict__
    try:
        msg_id, role, content, calls, created = (
            fields["id"],
            fields["role"],
            fields["content"],
            fields["tool_calls"],
            fields["created_at"],
        )
        if (
            len(fields) != _FIELD_COUNT
            or type(msg_id) is not str
            or not 0 < len(msg_id) <= MAX_MESSAGE_ID
            or type(role) is not str
            or role not in _ROLES
            or type(fields["name"]) not in _OPTIONAL_TEXT
            or type(fields["tool_call_id"]) not in _OPTIONAL_TEXT
            or type(fields["metadata"]) is not dict
            or type(created) is not datetime
            or created.tzinfo is not timezone.utc
            or type(calls) is not tuple
        ):
            return False
    except KeyError:  # a model_construct without a required field
        return False
    if type(content) not in _OPTIONAL_TEXT and not (
        type(content) is list and all(type(part) is dict for part in content)
    ):
        return False
    if not calls:
        return content is not None
    return role == "assistant" and all(
        type(call) is ToolCall
        and len(call.__dict__) == 3
        and all(type(call.__dict__.get(k)) is str for k in ("id", "name", "arguments"))
        for call in calls
    )


_BATCHES = (list, tuple)


def encode_batch(
    messages: Sequence[MessageLike], max_bytes: int, max_batch: int, max_batch_bytes: int
) -> list[Record]:
    """Validate and encode a batch for one append; nothing is written if this raises.

    Args:
        messages: the batch (a list or tuple; not a generator, whose length is unknown).
        max_bytes: the largest encoded message.
        max_batch: the most messages.
        max_batch_bytes: the largest sum of the encoded messages' sizes.
    """
    if type(messages) not in _BATCHES:  # the usual list passes two ABC checks less
        if isinstance(messages, (Message, Mapping, str, bytes)):
            raise InvalidMessageError("append takes a list of messages, not a single message")
        if not isinstance(messages, Sequence):
            raise InvalidMessageError(
                f"append takes a list of messages, not a {type(messages).__name__}"
            )
    if not messages:
        raise InvalidMessageError("append needs at least one message")
    if len(messages) > max_batch:
        raise InvalidMessageError(
            f"a batch holds at most {max_batch} messages, got {len(messages)}"
        )
    records = []
    total = 0
    for m in messages:
        records.append(encode_message(m, max_bytes))
        total += records[-1].size
        if total > max_batch_bytes:
            raise InvalidMessageError(
                f"a batch holds at most {max_batch_bytes} bytes encoded; its first "
                f"{len(records)} of {len(messages)} messages are {total} bytes"
            )
    if len({r.id for r in records}) != len(records):
        raise DuplicateMessageError("the batch repeats a message id")
    return records


# The stored envelope with Message's fields and types but not its Python validators:
# pydantic's core checks a body against them, then :func:`_checked` checks in Python
# what those validators check (called from pydantic, they cost twice the rest of the
# decoding: 20 stored messages 168 -> 82 µs, benchmarks/RESULTS.md). ``Literal[1]``
# takes 1, 1.0 and true, as the step-by-step decoding's ``!= 1`` does.
_MESSAGE_FIELDS: dict[str, Any] = {k: (f.annotation, f) for k, f in Message.model_fields.items()}
_StoredEnvelope = create_model(
    "_StoredEnvelope",
    __config__=ConfigDict(extra="forbid", frozen=True),
    v=(Literal[1], ...),
    m=(create_model("_StoredMessage", __config__=Message.model_config, **_MESSAGE_FIELDS), ...),
)
_UTC = timedelta(0)


def _checked(body: str | bytes) -> Message | None:
    """The Message of a stored envelope that passes every check of Message's, or None
    (the full decoding then decides). Builds the Message as ``model_construct`` does,
    without validating its fields a second time."""
    try:
        stored = _StoredEnvelope.model_validate_json(body).__dict__["m"]
    except ValidationError:
        return None
    fields = stored.__dict__  # handed over: the stored object is dropped
    role, content, calls, metadata = (
        fields["role"],
        fields["content"],
        fields["tool_calls"],
        fields["metadata"],
    )
    if (
        fields["created_at"].utcoffset() != _UTC  # naive or not UTC: converted by Message
        or (content is None and not (role == "assistant" and calls))
        or (calls and role != "assistant")
        or (metadata and _json_problem(metadata, MAX_NESTING))
        or (isinstance(content, list) and _json_problem(content, MAX_NESTING))
    ):
        return None
    fields["created_at"] = fields["created_at"].replace(tzinfo=timezone.utc)
    return _built(fields, stored.__pydantic_fields_set__)


# A pydantic model's four slots (its instance dict and BaseModel's three), set
# through their descriptors: what _built (and the LangGraph saver's copies) set.
# 0.37 us a Message, against 0.63 us setting all four by name with
# object.__setattr__ (20 messages from the decode cache: 19 -> 14 us).
set_dict, set_fields_set, set_extra, set_private = (
    vars(BaseModel)[slot].__set__
    for slot in (
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    )
)
_new = Message.__new__


def _built(fields: dict[str, Any], fields_set: set[str]) -> Message:
    """A Message of checked fields, built as ``model_construct`` does."""
    message = _new(Message)
    set_dict(message, fields)
    set_fields_set(message, fields_set)
    set_extra(message, None)
    set_private(message, None)
    return message


# Message's fields in order, with their defaults (a required field's or a factory's: None)
_DEFAULTS: dict[str, Any] = {
    name: None if field.is_required() or field.default_factory else field.default
    for name, field in Message.model_fields.items()
}


def constructed(**fields: Any) -> Message:
    """``Message.model_construct(**fields)`` for fields that include ``id``, ``role``,
    ``metadata`` and ``created_at``, built directly (3.7 -> 1.5 us a message): not
    validated (an append validates it as it encodes it: :func:`encode_message`)."""
    values = _DEFAULTS.copy()
    values.update(fields)
    return _built(values, set(fields))


# Bodies decoded lately, by their exact text: an agent reads the same tail of its
# session at every turn, and a stored body's text decodes to one Message whoever
# reads it. Only text bodies up to _DECODED_CHARS, of messages with text content
# and flat metadata (scalar values), are kept, as their fields: each read builds
# its Message with a metadata dict of its own; everything else in a Message is
# immutable. Damage changes the text, so a damaged record is never found here.
# At most _DECODED_COUNT bodies (oldest out first): ~2 MB for bodies of 1 KB.
_DECODED_COUNT = 1024
_DECODED_CHARS = 4096
_decoded: dict[str, tuple[dict[str, Any], frozenset[str]]] = {}
_SCALARS = (str, int, float, bool, type(None))


def _own(fields: dict[str, Any]) -> dict[str, Any]:
    """A copy of a Message's fields with a metadata dict of its own."""
    copy = dict(fields)
    copy["metadata"] = dict(copy["metadata"])
    return copy


def _remember(body: str, message: Message) -> None:
    if (
        len(body) > _DECODED_CHARS
        or not isinstance(message.content, (str, type(None)))
        or not all(isinstance(v, _SCALARS) for v in message.metadata.values())
    ):
        return
    if len(_decoded) >= _DECODED_COUNT:
        try:
            del _decoded[next(iter(_decoded))]
        except (KeyError, RuntimeError, StopIteration):  # another thread evicted it
            pass
    _decoded[body] = (_own(message.__dict__), frozenset(message.__pydantic_fields_set__))


def decode_all(session_id: str, stored: Iterable[tuple[int, str]]) -> list[Message]:
    """Stored ``(depth, body)`` pairs (a backend's answer), decoded in order;
    CorruptRecordError naming the first that cannot be."""
    return [decode_message(session_id, depth, body) for depth, body in stored]


def decode_message(session_id: str, depth: int, body: str | bytes) -> Message:
    """Decode a stored envelope, or raise CorruptRecordError naming session and depth."""
    if isinstance(body, str):
        seen = _decoded.get(body)
        if seen is not None:
            return _built(_own(seen[0]), set(seen[1]))
    message = _checked(body)  # reading a history is mostly this call
    if message is not None:
        if isinstance(body, str):
            _remember(body, message)
        return message
    try:
        envelope = json.loads(body)
        if not isinstance(envelope, dict) or set(envelope) != {"v", "m"}:
            raise ValueError("not a memvault envelope")
        if envelope["v"] != FORMAT_VERSION:
            raise ValueError(f"unknown format version {envelope['v']!r}")
        return Message.model_validate(envelope["m"])
    except RecursionError as exc:  # json.loads of a body nested thousands deep
        raise CorruptRecordError(session_id, depth, "nested too deeply to decode") from exc
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(session_id, depth, str(exc).splitlines()[0]) from exc
