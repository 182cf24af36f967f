"""memvault as pydantic-ai's conversation memory: ``MemvaultHistory``, ``MemvaultSummarizer``.

>>> history = MemvaultHistory("user-42", store=memvault.open("sqlite:///a.db"))  # doctest: +SKIP
>>> result = agent.run_sync("Hi", message_history=history.load())              # doctest: +SKIP
>>> history.extend(result.new_messages())                                      # doctest: +SKIP

A conversation is one memvault session; each ``ModelMessage`` is one memvault
message (see :mod:`memvault.integrations._pydantic_ai_codec`): its exact pydantic-ai
JSON in ``metadata["pydantic_ai"]``, its role, text and tool calls in the native
fields, so ``memvault show``, ``search`` and the inspector read it. The sync methods
run on a :class:`memvault.Store` (``store=``), the async ones (``aload``,
``aextend``, ``aversion``) on a :class:`memvault.AsyncStore` (``async_store=``);
``from_conn_string(url, conversation_id)`` opens either kind (``with``: sync,
``async with``: async).

Saving. ``extend(result.new_messages())`` appends a run's messages in one atomic
memvault append. Each message's memvault id is derived from its JSON (which holds
its timestamps and run id), so saving what the conversation already holds stores
nothing again: a retried save of the same run (after
:class:`~memvault.OutcomeUnknownError`, or from a second worker handed the same
result) is a no-op, and ``extend(result.all_messages())`` appends only what follows
the messages the conversation ends with. ``expect_version=`` makes the save
compare-and-set: read ``version`` before ``load()``, run the agent, and
``extend(..., expect_version=v)`` raises :class:`~memvault.ConflictError` if another
writer saved a turn meanwhile. Without it, concurrent saves are both kept, each one
contiguous. Messages hidden by ``session.pop()``, ``clear()`` or a rollback and saved
again are stored again.

Loading. ``load()`` returns the context view (a memvault summary first, if there is
one); ``load(last=N)`` the newest N, moved back as far as needed so that no tool
result comes without the response holding its call (pydantic-ai drops a result
whose call it does not see). A stored message this pydantic-ai cannot read (written
by a newer one, say) raises :class:`UnsupportedMessageError` naming the session and
its position; nothing is skipped.

Summaries. :class:`MemvaultSummarizer` is a history processor
(``Agent(..., capabilities=[ProcessHistory(summarizer)])``; pydantic-ai 2 has no
``history_processors=`` any more) that, when the history sent to the model grows
past ``max_messages``, summarizes the oldest messages with your function or agent
and stores the summary with :meth:`memvault.Session.summarize`: the originals stay
stored (``session.history(full=True)``), messages saved meanwhile stay after it, and
rolling back to a snapshot taken before undoes it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from memvault.aio import AsyncStore
from memvault.errors import (
    ConfigurationError,
    ConflictError,
    DuplicateMessageError,
    InvalidMessageError,
    version_conflict,
)
from memvault.integrations._common import (
    Append,
    Info,
    Plan,
    Read,
    Step,
    Summarize,
    UnsupportedMessageError,
    arun_plan,
    assign_ids,
    fresh_ids,
    missing_extra,
    perform,
    run_plan,
)
from memvault.integrations._opener import OneSession, Opener
from memvault.messages import Message, new_message_id
from memvault.model import MAX_COUNT, check_count
from memvault.store import Store

try:
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse

    from memvault.integrations._pydantic_ai_codec import (
        PAYLOAD_KEY,
        Undecodable,
        checked_batch,
        decode,
        key,
        payload,
        to_message,
        whole_window,
    )
# The optional dependency's imports, as in every adapter (names differ).
except ImportError as _exc:  # pragma: no cover - exercised by simulating the import
    raise missing_extra("pydantic_ai", "pydantic-ai", _exc) from _exc

__all__ = ["PAYLOAD_KEY", "MemvaultHistory", "MemvaultSummarizer", "UnsupportedMessageError"]

SUMMARY_PROMPT = (
    "Summarize the conversation so far for your own later use: the user's goals, the "
    "facts and decisions established, tool results that matter, and what is still open. "
    "Reply with the summary only."
)
"""The prompt a summarizing agent is run with, after the messages to summarize."""


class MemvaultHistory(OneSession):
    """A pydantic-ai conversation stored in memvault.

    Args:
        conversation_id: the memvault session id (any non-empty string up to 512
            characters).
        store: the sync store the sync methods use (left open: it is yours).
        async_store: the async store the async methods use (left open).

    Raises:
        ConfigurationError: neither store given, or a store of the wrong kind.
        InvalidMessageError: an invalid conversation id.
    """

    def __init__(
        self,
        conversation_id: str,
        *,
        store: Store | None = None,
        async_store: AsyncStore | None = None,
    ) -> None:
        self.conversation_id: str = self._bind(conversation_id, store, async_store)

    @classmethod
    def from_conn_string(
        cls, url: str | None, conversation_id: str, **options: Any
    ) -> Opener[MemvaultHistory]:
        """A history on memvault URL ``url``, as a sync or async context manager.

        ``with MemvaultHistory.from_conn_string(url, id) as history`` opens a sync
        store, ``async with`` an async one; leaving the block closes it. ``url`` None:
        ``$MEMVAULT_URL`` or ``sqlite:///memvault.db``. ``options`` are memvault's
        (``ttl=``, ``writer=``, ...). See :mod:`memvault.integrations._opener`.
        """
        return Opener(
            lambda store, async_store: cls(conversation_id, store=store, async_store=async_store),
            url,
            options,
        )

    def __repr__(self) -> str:
        return f"MemvaultHistory({self.conversation_id!r})"

    def load(self, last: int | None = None) -> list[ModelMessage]:
        """The conversation, oldest first, for ``agent.run(..., message_history=...)``.

        Args:
            last: only the newest ``last`` messages, and before them the responses
                holding the calls that tool results among them answer.

        Raises:
            InvalidArgumentError: ``last`` is not a count.
            UnsupportedMessageError: a stored message this pydantic-ai cannot read
                (named by session and position).
            CorruptRecordError: a stored record cannot be decoded at all.
        """
        return run_plan(self.session, _load_plan(self.conversation_id, _last(last)))  # type: ignore[no-any-return]

    async def aload(self, last: int | None = None) -> list[ModelMessage]:
        """:meth:`load` on the async store."""
        return await arun_plan(self.async_session, _load_plan(self.conversation_id, _last(last)))  # type: ignore[no-any-return]

    def extend(self, messages: Sequence[ModelMessage], *, expect_version: int | None = None) -> int:
        """Append ``messages`` (``result.new_messages()``) atomically, in order.

        Args:
            messages: the ModelMessages to store.
            expect_version: compare-and-set: raise ConflictError unless the
                conversation is at this version (0: it does not exist yet).

        Returns:
            The conversation's version after the save; a retry of a save that landed
            returns the current version and stores nothing.

        Raises:
            InvalidMessageError: not a list of ModelMessage, a message pydantic-ai
                cannot serialize, or over memvault's limits; nothing was written.
            ConflictError: ``expect_version`` did not match; nothing was written.
        """
        return run_plan(self.session, _extend_plan(self.conversation_id, messages, expect_version))  # type: ignore[no-any-return]

    async def aextend(
        self, messages: Sequence[ModelMessage], *, expect_version: int | None = None
    ) -> int:
        """:meth:`extend` on the async store."""
        return await arun_plan(  # type: ignore[no-any-return]
            self.async_session, _extend_plan(self.conversation_id, messages, expect_version)
        )

    @property
    def version(self) -> int:
        """The conversation's version: +1 on every change (0: it does not exist).

        For compare-and-set, read it before :meth:`load`: a save landing between the
        two then makes ``extend(..., expect_version=...)`` conflict, never pass.
        """
        info = self.session.info()
        return 0 if info is None else info.version

    async def aversion(self) -> int:
        """:attr:`version` on the async store."""
        info = await self.async_session.info()
        return 0 if info is None else info.version

    async def _perform(self, step: Step) -> Any:
        """``step`` on the async store if there is one, else on the sync one in a thread."""
        if self._async is not None:
            return await perform(self._async, step)
        return await asyncio.to_thread(perform, self.session, step)


def _last(last: int | None) -> int | None:
    return None if last is None else check_count("last", last)


def _load_plan(session_id: str, last: int | None) -> Plan:
    """Read the newest ``last`` (or all), widening the read until no result lacks its call."""
    n = last
    while True:
        stored = yield Read(n)
        complete = n is None or len(stored) < n
        try:
            models = decode(stored)
        except Undecodable as bad:
            if not (bad.unnamed and not complete):
                info = yield Info()
                length = len(stored) if info is None else info.length
                position = length - len(stored) + bad.index + 1
                raise UnsupportedMessageError(
                    f"session {session_id!r}, position {position}: {bad.reason}",
                    stored[bad.index],
                ) from None
            models = None  # the call that names it is further back
        if models is not None:
            if last is None:
                return models
            start = whole_window(models, max(len(models) - last, 0), complete)
            if start is not None:
                return models[start:]
        assert n is not None  # a whole read is complete
        n = min(2 * n, MAX_COUNT)


def _extend_plan(session_id: str, messages: object, expect_version: int | None) -> Plan:
    if expect_version is not None:
        check_count("expect_version", expect_version)
    models = checked_batch(messages)
    texts = [payload(m, i) for i, m in enumerate(models)]
    ids, _ = assign_ids([key(t) for t in texts])  # a repeat within the batch: its own id
    batch = [to_message(m, t, mid) for m, t, mid in zip(models, texts, ids, strict=True)]
    if batch:
        return (yield from _save_plan(batch, expect_version))
    info = yield Info()
    version = 0 if info is None else info.version
    if expect_version is not None and expect_version != version:
        raise version_conflict(session_id, version, expect_version)
    return version


def _save_plan(batch: list[Message], expect_version: int | None) -> Plan:
    """Append what ``batch`` adds to the conversation; returns the version after it.

    Ids are derived from the messages' JSON, so an id stored means that message is.
    An append that leaves the batch's last message the newest one appended it, or
    found it all stored (a retry of the save that ends the conversation): done, in
    the one extra read of the head. A batch stored whole elsewhere in the visible
    history is a retry too (others saved after it). A batch that begins with the
    messages the conversation ends with (``all_messages()`` after ``new_messages()``
    was saved) appends the rest. Messages stored but hidden (a pop, clear or
    rollback) are stored again, under fresh ids.
    """
    pending = batch
    while True:
        outcome = yield Append(pending, expect_version)
        if isinstance(outcome, DuplicateMessageError):  # some ids stored, some not
            tail = [m.id for m in (yield Read(len(pending)))]
            ids = [m.id for m in pending]
            shared = next((n for n in range(len(tail), 0, -1) if tail[-n:] == ids[:n]), 0)
            pending = pending[shared:] if shared else fresh_ids(pending)
            continue
        ids = [m.id for m in pending]
        if [m.id for m in (yield Read(1))] == ids[-1:]:
            return outcome  # appended, or the retry of the save that ends the history
        visible = [m.id for m in (yield Read(None))]
        if any(visible[i : i + len(ids)] == ids for i in range(len(visible) - len(ids), -1, -1)):
            return outcome  # appended (or a retry), and others saved after it
        pending = fresh_ids(pending)  # stored, but hidden


Summarizer = Callable[[list[ModelMessage]], "str | Awaitable[str]"]


class MemvaultSummarizer:
    """A pydantic-ai history processor that keeps the history short with memvault summaries.

    >>> summarizer = MemvaultSummarizer(history, summarize_agent)        # doctest: +SKIP
    >>> agent = Agent(model, capabilities=[ProcessHistory(summarizer)])  # doctest: +SKIP

    Before each model request, if the history holds more than ``max_messages``
    messages, the oldest ones (all but the newest ``keep_last``, and never a tool
    result apart from its call) are summarized, if they are stored in ``history``'s
    conversation: with ``summarize(messages)`` (a function returning the text, or a
    coroutine of it) or, given an agent, with its text output when run on those
    messages and :data:`SUMMARY_PROMPT`. The messages it gets are the conversation's
    context view through the last one summarized (the previous summary first, if
    any), which is what the new summary stands for.

    The summary is a ``ModelRequest`` holding one ``CompactionPart`` (pydantic-ai's
    form of a summary the application wrote), stored with memvault's ``summarize``:
    in one atomic step, the originals kept, messages saved meanwhile after it, undone
    by rolling back to a snapshot from before it. The model is then sent the summary
    and the messages after it; ``result.new_messages()`` still holds only the run's
    own messages, so saving them with ``history.extend`` works as without it. If the
    conversation changed so that the range cannot be summarized any more (another
    writer summarized, trimmed or rolled it back meanwhile), nothing is written and the
    history is sent whole; the next request tries again.

    Args:
        history: the conversation the run's history was loaded from. Its async store
            is used if it has one, else its sync store (on a worker thread).
        summarize: a function of the messages, or a pydantic-ai agent with text output.
        max_messages: summarize when the history holds more messages than this.
        keep_last: how many of the newest messages to send as they are.
    """

    def __init__(
        self,
        history: MemvaultHistory,
        summarize: Summarizer | AbstractAgent[Any, Any],
        *,
        max_messages: int = 40,
        keep_last: int = 10,
    ) -> None:
        if not isinstance(history, MemvaultHistory):
            raise ConfigurationError("history must be a MemvaultHistory")
        if not (isinstance(summarize, AbstractAgent) or callable(summarize)):
            raise ConfigurationError("summarize must be a function of the messages or an agent")
        self.max_messages = check_count("max_messages", max_messages)
        self.keep_last = check_count("keep_last", keep_last)
        if keep_last >= max_messages:
            raise ConfigurationError("keep_last must be less than max_messages")
        self.history = history
        self.summarize = summarize

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The history to send: ``messages``, or a summary and the newest of them."""
        if len(messages) <= self.max_messages:
            return messages
        info, stored = await self._do(Info()), await self._do(Read(None))
        view = decode(stored)
        job = _summary_job(messages, view, self.keep_last, 1 if info and info.summarized else 0)
        if job is None:
            return messages
        through, cut = job
        text = await self._text(view[: through + 1])
        summary = ModelRequest(parts=[CompactionPart(text)], timestamp=datetime.now(timezone.utc))
        message = to_message(summary, payload(summary, 0), new_message_id())
        try:
            await self._do(Summarize(message, stored[through].id))
        except (InvalidMessageError, ConflictError):
            return messages  # the range is gone (summarized, trimmed, rolled back)
        return [*decode([message]), *messages[cut:]]

    async def _do(self, step: Step) -> Any:
        return await self.history._perform(step)

    async def _text(self, messages: list[ModelMessage]) -> str:
        if isinstance(self.summarize, AbstractAgent):
            result = await self.summarize.run(SUMMARY_PROMPT, message_history=messages)
            output = result.output
        else:
            output = self.summarize(messages)
            if inspect.isawaitable(output):
                output = await output
        if not isinstance(output, str):
            raise InvalidMessageError(
                f"the summarizer returned a {type(output).__name__}, not the summary's text"
            )
        return output


def _summary_job(
    messages: list[ModelMessage], view: list[ModelMessage], keep_last: int, first: int
) -> tuple[int, int] | None:
    """What to summarize: the view index to summarize through and how many of
    ``messages`` that covers, or None. ``messages`` must open with a run of the view
    (the history loaded); ``first`` is the view's first index a summary may end at
    (1 when the view opens with a summary).

    The messages kept start with a response, whose results (if any) follow it: a
    request there would be merged by pydantic-ai into the summary's request (so left
    out of ``new_messages()``), and a result there would lose its call.
    """
    stored, start = 0, 0
    for k in range(len(view) - 1, -1, -1):  # where in the view the loaded window starts
        if view[k] == messages[0]:
            n = 0
            while n < len(messages) and k + n < len(view) and view[k + n] == messages[n]:
                n += 1
            if n > stored:
                stored, start = n, k
    for cut in range(min(len(messages) - keep_last, stored), 0, -1):
        if start + cut - 1 < first:
            return None
        if isinstance(messages[cut], ModelResponse) and whole_window(messages, cut, True) == cut:
            return start + cut - 1, cut
    return None
