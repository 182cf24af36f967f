"""memvault as a LangChain chat message history: ``MemvaultChatMessageHistory``.

>>> store = memvault.open("sqlite:///chat.db")                          # doctest: +SKIP
>>> history = MemvaultChatMessageHistory("user-42", store=store)       # doctest: +SKIP
>>> with MemvaultChatMessageHistory.from_conn_string("user-42", "sqlite:///chat.db") as h:
...     h.add_messages([HumanMessage("Hi")])                            # doctest: +SKIP

``MemvaultChatMessageHistory`` implements langchain-core's
``BaseChatMessageHistory``: ``messages`` / ``add_messages`` / ``clear`` run on a
sync :class:`memvault.Store`, ``aget_messages`` / ``aadd_messages`` / ``aclear`` on
a :class:`memvault.AsyncStore`; the async methods never call the sync ones (nor a
worker thread running them). Give the store(s) for the face(s) you use.

How a message is stored. Each LangChain message becomes one memvault
:class:`~memvault.Message`:

- ``metadata["langchain"]`` holds ``message_to_dict(message)`` (``{"type", "data"}``,
  LangChain's own serialization), checked before writing: it must survive JSON and
  rebuild a message equal to the original, of the same class. So every message
  type (human, AI, system, tool, function, chat, their chunks) comes back equal
  with its ``tool_calls``, ``invalid_tool_calls``, ``tool_call_chunks``, list
  content, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
  ``artifact``, ``status``, ``name`` and ``id``. A message that would not
  (an ``artifact`` or kwarg JSON cannot carry, a custom message class) is refused
  with :class:`~memvault.InvalidMessageError`; nothing of its batch is written.
- The native fields are a view for memvault's own tools and other readers: the
  role (human: user, AI: assistant, system, tool and function: tool, chat: its
  role when memvault knows it, else user), the text as ``content``, ``name``, an
  AI message's tool calls as :class:`~memvault.ToolCall` (arguments as JSON
  text), a tool message's ``tool_call_id``.
- The message's ``id``, when it has one, is its memvault id, so a retried
  ``add_messages`` (after :class:`~memvault.OutcomeUnknownError`) cannot store its
  messages twice: repeating the exact messages that end the history is a no-op.
  Any other add is stored, including messages cleared or rolled back and added
  back (``clear()`` then ``add_messages(kept)`` works). A batch in which no
  message has an id is always stored, so retrying it may store it twice, as with
  LangChain's own histories. See :mod:`memvault.integrations._common`.

Messages written by other writers (memvault's API, the Agents SDK adapter) carry
no LangChain payload; they are read as the message their native fields describe
(user: ``HumanMessage``, assistant: ``AIMessage`` with its tool calls, tool:
``ToolMessage``, system: ``SystemMessage``, developer: ``ChatMessage``), with the
memvault id as ``id``. ``clear()`` hides the history (snapshots still reach it, the
event log says who cleared it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from memvault.aio import AsyncStore
from memvault.errors import InvalidMessageError
from memvault.integrations._common import (
    add_plan,
    arun_plan,
    assign_ids,
    exact_json,
    missing_extra,
    run_plan,
    text_of,
)
from memvault.integrations._opener import OneSession, Opener
from memvault.messages import Message, ToolCall
from memvault.store import Store

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.messages.tool import invalid_tool_call, tool_call
# The optional dependency's imports, as in every adapter (names differ).
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("langchain", "langchain", _exc) from _exc

MESSAGE_KEY = "langchain"
_ROLES = {
    "user": "user",
    "human": "user",
    "system": "system",
    "developer": "developer",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
}

__all__ = ["MESSAGE_KEY", "MemvaultChatMessageHistory"]


class MemvaultChatMessageHistory(OneSession, BaseChatMessageHistory):
    """A LangChain chat message history stored in memvault.

    Args:
        session_id: the conversation's id (any non-empty string up to 512 characters).
        store: the sync store the sync methods use (left open: it is yours).
        async_store: the async store the async methods use (left open).

    Raises:
        ConfigurationError: neither store given, or a store of the wrong kind.
        InvalidMessageError: an invalid session id.
    """

    def __init__(
        self, session_id: str, *, store: Store | None = None, async_store: AsyncStore | None = None
    ) -> None:
        super().__init__()
        self.session_id: str = self._bind(session_id, store, async_store)

    @classmethod
    def from_conn_string(
        cls, session_id: str, url: str | None = None, **options: Any
    ) -> Opener[MemvaultChatMessageHistory]:
        """A history on memvault URL ``url``, as a sync or async context manager.

        ``with MemvaultChatMessageHistory.from_conn_string(id, url) as history``
        opens a sync store, ``async with`` an async one; leaving the block closes
        it. ``url`` None: ``$MEMVAULT_URL`` or ``sqlite:///memvault.db``. ``options``
        are memvault's (``ttl=``, ``writer=``, ...). See
        :mod:`memvault.integrations._opener`.
        """
        return Opener(
            lambda store, async_store: cls(session_id, store=store, async_store=async_store),
            url,
            options,
        )

    def __repr__(self) -> str:
        return f"MemvaultChatMessageHistory({self.session_id!r})"

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The stored messages, oldest first."""
        return [to_langchain(m) for m in self.session.history()]

    async def aget_messages(self) -> list[BaseMessage]:
        """The stored messages, oldest first (async store)."""
        return [to_langchain(m) for m in await self.async_session.history()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` atomically, in order.

        Raises:
            InvalidMessageError: a message cannot be stored exactly, or is over
                memvault's limits; nothing was written.
        """
        batch, keyed = _batch(messages)
        if batch:
            run_plan(self.session, add_plan(batch, keyed))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` atomically, in order (async store)."""
        batch, keyed = _batch(messages)
        if batch:
            await arun_plan(self.async_session, add_plan(batch, keyed))

    def clear(self) -> None:
        """Hide every message (snapshots still reach them; the event log says who)."""
        self.session.clear()

    async def aclear(self) -> None:
        """Hide every message (async store)."""
        await self.async_session.clear()


def _batch(messages: Sequence[BaseMessage]) -> tuple[list[Message], bool]:
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
        raise InvalidMessageError("add_messages takes a list of messages")
    payloads = [_payload(m, i) for i, m in enumerate(messages)]
    keys = [m.id if isinstance(m.id, str) else None for m in messages]
    ids, keyed = assign_ids(keys)
    batch = [to_message(m, p, mid) for m, p, mid in zip(messages, payloads, ids, strict=True)]
    return batch, keyed


def _payload(message: object, index: int) -> dict[str, Any]:
    """``message_to_dict(message)``, checked to rebuild an equal message from JSON."""
    if not isinstance(message, BaseMessage):
        raise InvalidMessageError(
            f"message {index} is a {type(message).__name__}, not a LangChain BaseMessage"
        )
    payload = cast(dict[str, Any], exact_json(message_to_dict(message), f"message {index}"))
    try:
        rebuilt = messages_from_dict([payload])[0]
    except (ValueError, TypeError) as exc:
        raise InvalidMessageError(f"message {index} cannot be rebuilt: {exc}") from exc
    if type(rebuilt) is not type(message) or rebuilt != message:
        raise InvalidMessageError(
            f"message {index} ({type(message).__name__}) would not come back equal: "
            "LangChain rebuilds it as a different message (a custom message class?)"
        )
    return payload


def to_message(message: BaseMessage, payload: dict[str, Any], message_id: str) -> Message:
    """The memvault message storing ``message`` (its checked ``payload``)."""
    fields: dict[str, Any] = {"role": "user", "content": text_of(message.content)}
    if isinstance(message, AIMessage):
        fields["role"] = "assistant"
        fields["tool_calls"] = tuple(
            ToolCall(
                id=call.get("id") or "",
                name=call["name"],
                arguments=json.dumps(call["args"], ensure_ascii=False),
            )
            for call in message.tool_calls
        )
    elif isinstance(message, SystemMessage):
        fields["role"] = "system"
    elif isinstance(message, ToolMessage):
        fields["role"], fields["tool_call_id"] = "tool", message.tool_call_id
    elif isinstance(message, FunctionMessage):
        fields["role"] = "tool"
    elif isinstance(message, ChatMessage):
        fields["role"] = _ROLES.get(message.role, "user")
    if isinstance(message.name, str):
        fields["name"] = message.name
    return Message(id=message_id, metadata={MESSAGE_KEY: payload}, **fields)


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message a stored message holds, or the one its native fields describe."""
    payload = message.metadata.get(MESSAGE_KEY)
    if isinstance(payload, dict):
        return messages_from_dict([payload])[0]
    content: Any = message.content if message.content is not None else ""
    common: dict[str, Any] = {"content": content, "id": message.id}
    if message.name is not None:
        common["name"] = message.name
    if message.role == "user":
        return HumanMessage(**common)
    if message.role == "system":
        return SystemMessage(**common)
    if message.role == "developer":
        return ChatMessage(role="developer", **common)
    if message.role == "tool":
        return ToolMessage(tool_call_id=message.tool_call_id or "", **common)
    calls, invalid = [], []
    for call in message.tool_calls:
        try:
            args = json.loads(call.arguments)
        except ValueError:
            args = None
        if isinstance(args, dict):
            calls.append(tool_call(name=call.name, args=args, id=call.id or None))
        else:
            invalid.append(
                invalid_tool_call(
                    name=call.name, args=call.arguments, id=call.id or None, error=None
                )
            )
    return AIMessage(tool_calls=calls, invalid_tool_calls=invalid, **common)
