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
over ``session_settings.limit`` (given as a ``SessionSettings`` or a dict, normalized
like the SDK's sessions do); ``None`` reads everything, ``N > 0`` the newest N
items oldest first, ``0`` nothing, a negative limit everything. A limited read never
returns a tool output (``function_call_output`` and the other ``*_output`` items)
whose call fell outside the window: such outputs are left out, so the model is
never sent an answer without its question (openai/openai-agents-python#4322).

Compaction. ``MemvaultSession`` is also an ``OpenAIResponsesCompactionAwareSession``:
:meth:`~MemvaultSession.run_compaction` sends the context view to
``responses.compact`` and stores the compacted items as a memvault summary
(:meth:`memvault.AsyncSession.summarize`) through the last item it sent. Nothing is
deleted: the originals stay readable (``async_session.history(full=True)``), items added
while the compaction ran stay after it, a compaction that raises or is cancelled
writes nothing, and rolling back to a snapshot taken before undoes it. ``clear_session``
hides the history (snapshots still reach it, and the event log says who cleared
it); :meth:`memvault.AsyncSession.delete` removes it physically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, cast

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
from memvault.integrations._opener import Opener, checked
from memvault.messages import Message, ToolCall
from memvault.model import Snapshot
from memvault.store import Store

try:
    from agents.items import TResponseInputItem
    from agents.memory.openai_responses_compaction_session import (
        default_should_trigger_compaction,
        select_compaction_candidate_items,
    )
    from agents.memory.session import OpenAIResponsesCompactionArgs
    from agents.memory.session_settings import SessionSettings, coerce_session_settings
    from agents.models.fake_id import FAKE_RESPONSES_ID
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("openai_agents", "openai-agents", _exc) from _exc

ITEM_KEY = "openai_agents"
COMPACTION_KEY = "openai_agents_compaction"
"""The metadata key of a compaction summary: the list of compacted items."""
_MESSAGE_ROLES = ("user", "system", "developer", "assistant")

__all__ = ["COMPACTION_KEY", "ITEM_KEY", "MemvaultSession", "UnsupportedMessageError"]


class MemvaultSession:
    """An OpenAI Agents SDK session stored in memvault.

    Args:
        session_id: the conversation's id (any non-empty string up to 512 characters).
        store: a store URL (opened here, closed by :meth:`close`), an open
            :class:`memvault.AsyncStore` (shared, left open), or None for
            ``$MEMVAULT_URL`` / ``sqlite:///memvault.db``.
        async_store: an open :class:`memvault.AsyncStore` (left open), the keyword
            the other adapters take; give it or ``store``, not both.
        session_settings: the SDK's settings (or a dict of them); ``limit`` is the
            default for :meth:`get_items`.
        compaction_client: the ``AsyncOpenAI`` client :meth:`run_compaction` calls
            (``responses.compact``); default: a new ``AsyncOpenAI()`` on first use.
        compaction_model: the model compaction runs on (default ``gpt-4.1``).
        should_trigger_compaction: decides, from the SDK's context dict
            (``compaction_candidate_items``, ``session_items``, ``response_id``,
            ``compaction_mode``), whether an unforced compaction runs; default: the
            SDK's (10 or more candidate items).
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
        async_store: AsyncStore | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        compaction_client: Any = None,
        compaction_model: str = "gpt-4.1",
        should_trigger_compaction: Callable[[dict[str, Any]], bool] | None = None,
        **options: Any,
    ) -> None:
        if async_store is not None:
            if store is not None:
                raise ConfigurationError("give store or async_store=, not both")
            store = checked(None, async_store)[1]
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
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self._compaction_client = compaction_client
        self.compaction_model = compaction_model
        self.should_trigger_compaction = (
            should_trigger_compaction or default_should_trigger_compaction
        )

    @classmethod
    def from_conn_string(
        cls,
        session_id: str,
        url: str | None = None,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        **options: Any,
    ) -> Opener[MemvaultSession]:
        """A session on memvault URL ``url``, as an async context manager.

        ``async with MemvaultSession.from_conn_string(id, url) as session`` opens an
        async store and closes it on leaving (``with`` is refused: the SDK is
        async). ``options`` are memvault's (``ttl=``, ``writer=``, ...); the
        compaction settings are the constructor's. See
        :mod:`memvault.integrations._opener`.
        """

        def build(store: Store | None, async_store: AsyncStore | None) -> MemvaultSession:
            if async_store is None:
                raise ConfigurationError(
                    "the Agents SDK is async: use `async with "
                    "MemvaultSession.from_conn_string(...)`"
                )
            return cls(session_id, async_store=async_store, session_settings=session_settings)

        return Opener(build, url, options)

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
        items = _expand(await self._session.history(last))
        return items if last is None else _whole_tool_groups(items[-last:])

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
        When the history holds only a compaction, the pop undoes it (the items it
        stood for are back) and returns its last compacted item.

        Raises:
            UnsupportedMessageError: the popped message, written by another writer,
                has no one-item equivalent; it is hidden and carried by the error.
        """
        message = await self._session.pop()
        return None if message is None else _items_of(message)[-1]

    async def clear_session(self) -> None:
        """Hide every item (snapshots still reach them; the event log says who)."""
        await self._session.clear()

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Compact the history with ``responses.compact``, keeping the originals.

        Unless ``args["force"]``, runs only when ``should_trigger_compaction``
        approves, and never while a tool call waits for its output. The context view
        is sent (``compaction_mode`` "input"), or the response chain
        (``"previous_response_id"``, the default in "auto" when ``response_id`` is
        given and ``store`` is not False). The compacted items are stored as one
        summary standing for every item sent, in one atomic write after the call
        returns: items added meanwhile stay after it; an error or a cancellation
        before that write changes nothing.

        Raises:
            ValueError: ``previous_response_id`` mode without a ``response_id``.
            InvalidMessageError: the history changed under the compaction (an item
                sent was popped, cleared or rolled back meanwhile); nothing was written.
        """
        args = args or {}
        messages = await self._session.history()
        items = _expand(messages)
        response_id = args.get("response_id")
        mode = _compaction_mode(args.get("compaction_mode", "auto"), response_id, args.get("store"))
        if mode == "previous_response_id" and not response_id:
            raise ValueError("previous_response_id compaction needs a response_id")
        context = {
            "response_id": response_id,
            "compaction_mode": mode,
            "compaction_candidate_items": select_compaction_candidate_items(items),
            "session_items": items,
        }
        if (
            not messages
            or _whole_tool_groups(items, calls_too=True) != items
            or not (args.get("force", False) or self.should_trigger_compaction(context))
        ):
            return
        request: dict[str, Any] = {"model": self.compaction_model}
        if mode == "previous_response_id":
            request["previous_response_id"] = response_id
        else:
            request["input"] = items
        compacted = await self._client().responses.compact(**request)
        output = [
            exact_json(
                i if isinstance(i, Mapping) else i.model_dump(exclude_unset=True, warnings=False),
                f"compacted item {n}",
            )
            for n, i in enumerate(compacted.output or [])
        ]
        summary = Message.system(
            f"compaction of {len(items)} items", metadata={COMPACTION_KEY: output}
        )
        await self._session.summarize(summary, through=messages[-1].id)

    def _client(self) -> Any:
        if self._compaction_client is None:
            from openai import AsyncOpenAI  # a dependency of the SDK; only when needed

            self._compaction_client = AsyncOpenAI()
        return self._compaction_client

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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _compaction_mode(
    requested: str, response_id: str | None, store: bool | None
) -> Literal["previous_response_id", "input"]:
    """The SDK's resolution of "auto": the response chain when there is a stored one."""
    if requested in ("previous_response_id", "input"):
        return cast(Literal["previous_response_id", "input"], requested)
    return "input" if store is False or not response_id else "previous_response_id"


def _items_of(message: Message) -> list[TResponseInputItem]:
    """The items a message stands for: a compaction's compacted items, else one."""
    compacted = message.metadata.get(COMPACTION_KEY)
    if isinstance(compacted, list):
        return cast(list[TResponseInputItem], compacted)
    return [to_item(message)]


def _expand(messages: list[Message]) -> list[TResponseInputItem]:
    return [item for m in messages for item in _items_of(m)]


def _whole_tool_groups(
    items: list[TResponseInputItem], *, calls_too: bool = False
) -> list[TResponseInputItem]:
    """``items`` without the tool outputs whose call is not among them (and, with
    ``calls_too``, without the calls whose output is not)."""

    def call_id(item: Any) -> tuple[bool, Any] | None:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if not isinstance(kind, str) or not isinstance(item.get("call_id"), str):
            return None
        return kind.endswith("_output"), item["call_id"]

    keys = [call_id(i) for i in items]
    present = {k for k in keys if k is not None}
    return [
        i
        for i, k in zip(items, keys, strict=True)
        if k is None or (not k[0] and not calls_too) or (not k[0], k[1]) in present
    ]


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
        fields = {
            "role": "tool",
            "content": text_of(item.get("output")),
            "tool_call_id": call_id if isinstance(call_id, str) else None,
        }
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
        item = {
            "type": "function_call_output",
            "call_id": message.tool_call_id or "",
            "output": message.content if message.content is not None else "",
        }
    elif message.tool_calls:
        if len(message.tool_calls) != 1 or message.content:
            raise UnsupportedMessageError(
                "an assistant turn with text or several tool calls is more than one item",
                message,
            )
        call = message.tool_calls[0]
        item = {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
    else:
        item = {"role": message.role, "content": message.content}
    return cast(TResponseInputItem, item)
