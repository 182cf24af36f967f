"""What the framework adapters share; nothing here imports a framework.

The adapters store one framework object (an Agents SDK item, a LangChain message)
as one :class:`~memvault.Message` whose ``metadata`` holds the object as JSON,
checked to survive the trip exactly. Appending goes through :func:`add_plan`, a
sans-I/O plan run by :func:`run_plan` (sync) or :func:`arun_plan` (async), so the
two faces share every decision and differ only in how they call the store.

Ids. memvault ids are unique per session for ever (hidden messages included) and a
batch whose ids are all stored is a no-op. Framework ids are not that strict: the
Agents SDK pops items and adds them back when it rewinds a turn, chat-completions
models give every item the placeholder id ``__fake_id__``, test models reuse ids,
and LangChain apps clear a history and add the same messages again. Mapping
framework ids straight onto memvault ids would silently drop such re-adds, so
:func:`add_plan` does this:

1. A batch with no usable framework id gets fresh memvault ids: plain append.
2. Otherwise a message with a framework id uses it as its memvault id, the others
   get ids derived from the batch's framework ids and their position, so the same
   batch always maps to the same memvault ids and retrying it (for instance after
   :class:`~memvault.OutcomeUnknownError`) cannot store it twice.
3. After that append the history is read back (its tail; all of it only if other
   writers appended after us). If it holds these very messages, the append
   happened. If not, it was a no-op: when the newest visible messages are the same
   objects (same framework ids, same content), the call was a retry of the
   previous add and nothing more is done; otherwise the objects were hidden
   (popped, cleared, rolled back) or are older turns, and the batch is appended
   again under fresh memvault ids. A batch mixing stored and new ids is appended
   under fresh ids too. So nothing the caller adds is ever dropped, except an exact
   repeat of the objects that end the history, which is what a retry looks like.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from memvault.aio import AsyncSession
from memvault.errors import (
    ConfigurationError,
    DuplicateMessageError,
    InvalidMessageError,
    MemvaultError,
)
from memvault.messages import Message, new_message_id
from memvault.sansio import drive, drive_async
from memvault.store import Session

MAX_ID = 256  # Message.id's max_length


class UnsupportedMessageError(MemvaultError, ValueError):
    """A stored message that the adapter cannot return as one framework object.

    Raised when reading a message written by another writer (memvault's own API,
    another adapter) whose shape has no one-object equivalent in the framework.
    Nothing is hidden or changed by the read; ``message`` is the stored message.
    """

    def __init__(self, reason: str, message: Message) -> None:
        super().__init__(f"message {message.id!r}: {reason}")
        self.message = message


def missing_extra(module: str, extra: str, exc: ImportError) -> ConfigurationError:
    """The error raised when an adapter's framework is not installed."""
    return ConfigurationError(
        f"memvault.integrations.{module} needs {exc.name or 'its framework'}, "
        f"an optional dependency: pip install 'memvault[{extra}]'"
    )


def exact_json(value: Any, what: str) -> Any:
    """A JSON copy of ``value``, or InvalidMessageError if JSON cannot carry it exactly.

    Exactly means the copy compares equal: tuples, sets, bytes, non-string keys,
    NaN and arbitrary objects are refused rather than changed on the way.
    """
    try:
        copy = json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidMessageError(f"{what} is not JSON data: {exc}") from exc
    if copy != value:
        raise InvalidMessageError(
            f"{what} would not come back unchanged from JSON (a tuple, a non-string key, "
            "or another value JSON turns into something else)"
        )
    return copy


def text_of(content: Any) -> str:
    """The text of a content value: a string, or the text of a list of parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts)


def assign_ids(keys: Sequence[str | None]) -> tuple[list[str], bool]:
    """memvault ids for a batch whose framework ids are ``keys``.

    Returns the ids and whether the batch is keyed (step 2 of the module
    docstring): a framework id is used where it is a valid memvault id and not
    repeated within the batch; the other positions get ids derived from the batch.
    """
    usable: list[str | None] = []
    seen: set[str] = set()
    for key in keys:
        ok = key is not None and 0 < len(key) <= MAX_ID and key not in seen
        usable.append(key if ok else None)
        if key is not None:
            seen.add(key)
    if not any(usable):
        return [new_message_id() for _ in keys], False
    salt = hashlib.sha256(json.dumps(list(keys)).encode()).hexdigest()
    return [key if key is not None else f"mv:{salt[:40]}:{i}" for i, key in enumerate(usable)], True


@dataclass(frozen=True)
class Append:
    """Plan step: append ``messages`` (compare-and-set on ``expect_version`` if given).
    The plan receives the new version, or the DuplicateMessageError the append raised
    (it re-raises what it does not expect); a ConflictError propagates."""

    messages: list[Message]
    expect_version: int | None = None


@dataclass(frozen=True)
class Read:
    """Plan step: read the visible history (``last`` newest, or all)."""

    last: int | None


@dataclass(frozen=True)
class Info:
    """Plan step: the session's :class:`~memvault.SessionInfo` (None if it does not exist)."""


@dataclass(frozen=True)
class Summarize:
    """Plan step: store ``summary`` standing for the messages through ``through``
    (:meth:`memvault.Session.summarize`); the plan receives the new version."""

    summary: Message
    through: str


Step = Append | Read | Info | Summarize
Plan = Generator[Step, Any, Any]


def add_plan(batch: list[Message], keyed: bool) -> Plan:
    """The steps that add ``batch`` without dropping or duplicating it (see module doc)."""
    if keyed:
        outcome = yield Append(batch)
        if not isinstance(outcome, DuplicateMessageError):
            tail = yield Read(len(batch))
            if tail == batch:  # these very messages (ids, created_at, ...): the common case
                return
            if [m.metadata for m in tail] == [m.metadata for m in batch]:
                return  # a no-op repeating the newest objects: a retry
            if _holds_run((yield Read(None)), batch):
                return  # appended, then other writers appended after it
        batch = fresh_ids(batch)
    outcome = yield Append(batch)
    if isinstance(outcome, DuplicateMessageError):
        raise outcome  # fresh ids cannot collide; never drop the batch silently


def fresh_ids(batch: list[Message]) -> list[Message]:
    """``batch`` under new memvault ids (for messages a pop, clear or rollback hid)."""
    return [m.model_copy(update={"id": new_message_id()}) for m in batch]


def _holds_run(visible: list[Message], batch: list[Message]) -> bool:
    """True if ``visible`` holds these very messages, adjacent and in order."""
    n = len(batch)
    return any(visible[start : start + n] == batch for start in range(len(visible) - n, -1, -1))


def perform(session: Session | AsyncSession, step: Step) -> Any:
    """Do ``step`` on a Session (the result) or an AsyncSession (an awaitable of it)."""
    if isinstance(step, Read):
        return session.history(step.last)
    if isinstance(step, Info):
        return session.info()
    if isinstance(step, Summarize):
        return session.summarize(step.summary, through=step.through)
    return session.append(step.messages, expect_version=step.expect_version)


def run_plan(session: Session, plan: Plan) -> Any:
    """Run a plan on a sync session; returns what the plan returns."""

    def step(request: Step) -> Any:
        try:
            return perform(session, request)
        except DuplicateMessageError as exc:
            return exc

    return drive(plan, step)


async def arun_plan(session: AsyncSession, plan: Plan) -> Any:
    """Run a plan on an async session; it never touches a sync store."""

    async def step(request: Step) -> Any:
        try:
            return await perform(session, request)
        except DuplicateMessageError as exc:
            return exc

    return await drive_async(plan, step)
