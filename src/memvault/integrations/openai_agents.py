"""memvault as an OpenAI Agents SDK session: ``MemvaultSession``.

>>> session = MemvaultSession("user-42", "sqlite:///agent.db")    # doctest: +SKIP
>>> result = await Runner.run(agent, "Hi", session=session)       # doctest: +SKIP

``MemvaultSession`` implements the SDK's ``Session`` protocol structurally
(``session_id``, ``session_settings``, ``get_items``, ``add_items``, ``pop_item``,
``clear_session``) on a :class:`memvault.AsyncStore`, and adds memvault's
``snapshot``, ``rollback`` and ``fork``; :attr:`MemvaultSession.async_session` is
the underlying :class:`memvault.AsyncSession` for everything else (``log``, ``info``,
``trim``), under the name LangChain's ``MemvaultChatMessageHistory`` gives it.

How an item is stored. Each ``TResponseInputItem`` becomes one memvault
:class:`~memvault.Message`:

- ``metadata["openai_agents"]`` holds the item itself, untouched. It is what
  ``get_items`` and ``pop_item`` return, so every item kind (messages with text or
  content parts, function calls and outputs, reasoning, tool-search, shell,
  computer, MCP, compaction items, and kinds the SDK adds later) comes back equal
  to what was added, same keys in the same order, same types. An item JSON cannot
  carry exactly (a tuple, a set, bytes, NaN, a non-string key, an object) is
  refused with :class:`~memvault.InvalidMessageError`; nothing of its batch is
  written.
- The native fields are a view for memvault's own tools and other readers:
  a message item (``role`` user, system, developer or assistant) keeps its role
  and its text as ``content``; a ``function_call`` is an assistant turn with one
  :class:`~memvault.ToolCall` (``call_id``, ``name``, ``arguments``); an item whose
  type ends in ``_output`` is a ``tool`` turn answering its ``call_id``, with the
  output's text; any other item is an assistant turn with empty content.
- The item's ``id``, when it has a real one, is the message's memvault id, so a
  retried ``add_items`` (after :class:`~memvault.OutcomeUnknownError`) cannot store
  its items twice: repeating the exact items that end the history is a no-op.
  Any other add is stored, including items popped, cleared or rolled back and
  added back (the SDK does this when it rewinds a turn) and items whose id an
  earlier turn already used. A batch without any real id (a user turn alone) is
  always stored, so retrying it may store it twice, as with the SDK's own
  sessions. Placeholder ids (``__fake_id__``) and ``item_reference`` ids (which
  name another item) are not real ids. See :mod:`memvault.integrations._common`.

Messages written by other writers (memvault's API, the LangChain adapter) carry no
item; they are read back as the item their native fields describe: a text turn as
``{"role", "content"}``, a tool result as a ``function_call_output``, an assistant
turn with one tool call and no text as a ``function_call``. Other shapes raise
:class:`~memvault.integrations._common.UnsupportedMessageError`.

``limit`` is the SDK's own ``SQLiteSession`` semantics: an explicit ``limit`` wins
over ``session_settings.limit``; ``None`` reads everything, ``N > 0`` the newest N
items oldest first, ``0`` nothing, a negative limit everything. ``clear_session``
hides the history (snapshots still reach it, and the event log says who cleared
it); :meth:`memvault.AsyncSession.delete` removes it physically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, cast

from memvault.aio import AsyncSession, AsyncStore, open_async
from memvault.errors import ConfigurationError, InvalidMessageError
from memvault.integrations._common import (
    UnsupportedMessageError,
    add_plan,
    arun_plan,
    assign_ids,
    exact_json,
    missing_extra,
    text_of,
)
from memvault.messages import Message, ToolCall
from memvault.model import Snapshot

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.models.fake_id import FAKE_RESPONSES_ID
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("openai_agents", "openai-agents", _exc) from _exc

ITEM_KEY = "openai_agents"
_MESSAGE_ROLES = ("user", "system", "developer", "assistant")

__all__ = ["ITEM_KEY", "MemvaultSession", "UnsupportedMessageError"]


class MemvaultSession:
    """An OpenAI Agents SDK session stored in memvault.

    Args:
        session_id: the conversation's id (any non-empty string up to 512 characters).
        store: a store URL (opened here, closed by :meth:`close`), an open
            :class:`memvault.AsyncStore` (shared, left open), or None for
            ``$MEMVAULT_URL`` / ``sqlite:///memvault.db``.
        session_settings: the SDK's settings; ``limit`` is the default for
            :meth:`get_items`.
        **options: options for :func:`memvault.open_async` when ``store`` is a URL
            (``ttl``, ``writer``, ...).

    Raises:
        ConfigurationError: a bad URL or option, or options given with a store.
        InvalidMessageError: an invalid session id.
    """

    def __init__(
        self,
        session_id: str,
        store: str | AsyncStore | None = None,
        *,
        session_settings: SessionSettings | None = None,
        **options: Any,
    ) -> None:
        if isinstance(store, AsyncStore):
            if options:
                raise ConfigurationError("options apply to a URL, not to an open store")
            self._store, self._owned = store, False
        elif store is None or isinstance(store, str):
            self._store, self._owned = open_async(store, **options), True
        else:
            raise ConfigurationError(
                f"store must be a URL or a memvault.AsyncStore, not {type(store).__name__} "
                "(the Agents SDK is async: use memvault.open_async)"
            )
        self._session = self._store.session(session_id)
        self.session_id: str = self._session.id
        self.session_settings: SessionSettings | None = (
            session_settings if session_settings is not None else SessionSettings()
        )

    def __repr__(self) -> str:
        return f"MemvaultSession({self.session_id!r}, {self._store!r})"

    @property
    def async_session(self) -> AsyncSession:
        """The memvault session underneath: ``log()``, ``info()``, ``trim()``, ...
        (the same attribute as ``MemvaultChatMessageHistory.async_session``)."""
        return self._session

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The stored items, oldest first; ``limit``: only the newest ``limit``.

        Raises:
            CorruptRecordError: a stored message cannot be decoded.
            UnsupportedMessageError: a message written by another writer has no
                one-item equivalent.
        """
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit == 0:
            return []
        last = limit if limit is not None and limit > 0 else None  # negative: all, as SQLite
        return [to_item(m) for m in await self._session.history(last)]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` atomically, in order.

        Raises:
            InvalidMessageError: an item is not a mapping, JSON cannot carry it
                exactly, or it is over memvault's limits; nothing was written.
        """
        if isinstance(items, Mapping) or not isinstance(items, Sequence):
            raise InvalidMessageError("add_items takes a list of items")
        if not items:
            return
        payloads = [_payload(item, i) for i, item in enumerate(items)]
        ids, keyed = assign_ids([_key(p) for p in payloads])
        batch = [to_message(p, mid) for p, mid in zip(payloads, ids, strict=True)]
        await arun_plan(self._session, add_plan(batch, keyed))

    async def pop_item(self) -> TResponseInputItem | None:
        """Hide the newest item and return it; None if there is none.

        The item stays reachable from snapshots and the event log records the pop.

        Raises:
            UnsupportedMessageError: the popped message, written by another writer,
                has no one-item equivalent; it is hidden and carried by the error.
        """
        message = await self._session.pop()
        return None if message is None else to_item(message)

    async def clear_session(self) -> None:
        """Hide every item (snapshots still reach them; the event log says who)."""
        await self._session.clear()

    async def snapshot(self, name: str) -> Snapshot:
        """Save the current history under ``name`` (O(1); see memvault.AsyncSession)."""
        return await self._session.snapshot(name)

    async def rollback(self, name: str) -> Snapshot:
        """Restore snapshot ``name``; returns the auto-saved snapshot of the replaced state."""
        return await self._session.rollback(name)

    async def fork(self, new_session_id: str, *, at: str | None = None) -> MemvaultSession:
        """A new session starting from this history (or from snapshot ``at``).

        The fork shares this session's store and settings.

        Raises:
            ConflictError: ``new_session_id`` already exists.
        """
        forked = await self._session.fork(new_session_id, at=at)
        return MemvaultSession(forked.id, self._store, session_settings=self.session_settings)

    async def close(self) -> None:
        """Close the store if this session opened it from a URL."""
        if self._owned:
            await self._store.close()

    # The async context manager protocol, as AsyncStore has it.
    async def __aenter__(self) -> MemvaultSession:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


def _payload(item: object, index: int) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise InvalidMessageError(
            f"item {index} is a {type(item).__name__}, not a mapping (TResponseInputItem)"
        )
    return cast(dict[str, Any], exact_json(item, f"item {index}"))


def _key(item: dict[str, Any]) -> str | None:
    """The item's own id, if it is one that identifies it."""
    key = item.get("id")
    if not isinstance(key, str) or key == FAKE_RESPONSES_ID or item.get("type") == "item_reference":
        return None
    return key


def to_message(item: dict[str, Any], message_id: str) -> Message:
    """The memvault message storing ``item`` (a JSON-exact copy) under ``message_id``."""
    kind, role = item.get("type"), item.get("role")
    fields: dict[str, Any]
    if role in _MESSAGE_ROLES and kind in (None, "message"):
        fields = {"role": role, "content": text_of(item.get("content"))}
    elif kind == "function_call" and all(
        isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")
    ):
        call = ToolCall(id=item["call_id"], name=item["name"], arguments=item["arguments"])
        fields = {"role": "assistant", "content": None, "tool_calls": (call,)}
    elif isinstance(kind, str) and kind.endswith("_output"):
        call_id = item.get("call_id")
        fields = {"role": "tool", "content": text_of(item.get("output")),
                  "tool_call_id": call_id if isinstance(call_id, str) else None}
    else:
        fields = {"role": "assistant", "content": ""}
    return Message(id=message_id, metadata={ITEM_KEY: item}, **fields)


def to_item(message: Message) -> TResponseInputItem:
    """The item a stored message holds, or the one its native fields describe."""
    stored = message.metadata.get(ITEM_KEY)
    if isinstance(stored, dict):
        return cast(TResponseInputItem, stored)
    item: dict[str, Any]
    if message.role == "tool":
        item = {"type": "function_call_output", "call_id": message.tool_call_id or "",
                "output": message.content if message.content is not None else ""}
    elif message.tool_calls:
        if len(message.tool_calls) != 1 or message.content:
            raise UnsupportedMessageError(
                "an assistant turn with text or several tool calls is more than one item",
                message,
            )
        call = message.tool_calls[0]
        item = {"type": "function_call", "call_id": call.id, "name": call.name,
                "arguments": call.arguments}
    else:
        item = {"role": message.role, "content": message.content}
    return cast(TResponseInputItem, item)
