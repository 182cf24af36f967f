"""The records memvault returns besides messages, and the limits it enforces."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from memvault.errors import (
    ConfigurationError,
    InvalidArgumentError,
    InvalidMessageError,
    damaged_snapshot,
)

AUTO_PREFIX = "auto:"
MAX_COUNT = 2**63 - 1
"""The largest count any backend stores (a signed 64-bit integer)."""
MAX_MESSAGE_ID = 256
"""The most characters in a message id (``Message.id``, ``expect_message``)."""


def utc(epoch: float) -> datetime:
    """Epoch seconds (as stored) to an aware UTC datetime."""
    return datetime.fromtimestamp(epoch, timezone.utc)


def to_datetime(epoch: float | None) -> datetime | None:
    """Like :func:`utc`, keeping None (no expiry)."""
    return None if epoch is None else utc(epoch)


@dataclass(frozen=True)
class SessionInfo:
    """The state of a session.

    Attributes:
        session_id: the session's id.
        version: +1 on every change to the visible history.
        length: number of visible messages.
        created_at / updated_at: first and latest write.
        expires_at: when the session expires (None: never).
        summarized: number of messages the context view's summary stands for (0: no
            summary, or its whole range hidden by a trim or clear). ``history()``
            returns ``length`` messages; ``history(full=True)`` also the summarized ones.
    """

    session_id: str
    version: int
    length: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    summarized: int = 0


@dataclass(frozen=True)
class Snapshot:
    """A named pointer to a state of the history; saving one copies no message.

    Attributes:
        name: unique within the session; ``auto:`` names are made by rollback.
        head / base: the chain pointer and the trim floor it captured.
        version: the session version when it was taken.
        length: number of visible messages it holds in the full view (the chain above
            base, summarized messages included, summaries not counted).
        created_at: when it was taken.
        auto: True for the pre-rollback snapshots rollback saves.
        summary / through: the summary pointer it captured (node and the depth of the
            last message it stands for; 0, 0: none). A rollback restores it, so rolling
            back to before a summary undoes it.
    """

    name: str
    head: int
    base: int
    version: int
    length: int
    created_at: datetime
    auto: bool
    summary: int = 0
    through: int = 0


def check_snapshot(session_id: str, snap: Snapshot, next_node: int) -> Snapshot:
    """``snap``, a snapshot of a session whose next node id is ``next_node``, if its
    pointers can be right; else CorruptRecordError naming it (a rollback to it would
    leave the session a length below 0 or a head that is not there)."""
    if (
        min(snap.head, snap.base, snap.length) < 0
        or snap.head >= next_node
        or (snap.head == 0) != (snap.base + snap.length == 0)
    ):
        raise damaged_snapshot(session_id, snap.name)
    return snap


@dataclass(frozen=True)
class Event:
    """One entry of a session's operation log: who changed what, and when.

    ``head``/``base`` before and after make every change traceable and undoable.
    """

    version: int
    op: str
    writer: str
    at: datetime
    head_before: int
    base_before: int
    head_after: int
    base_after: int
    detail: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> tuple[Any, ...]:
        """Its fields in order, ``at`` as epoch seconds: what a backend stores."""
        return (
            self.version,
            self.op,
            self.writer,
            self.at.timestamp(),
            self.head_before,
            self.base_before,
            self.head_after,
            self.base_after,
            self.detail,
        )


@dataclass(frozen=True)
class CompactStats:
    """What ``Store.compact`` removed: messages (nodes), events, expired sessions,
    and search vectors no stored message uses any more."""

    nodes: int = 0
    events: int = 0
    sessions: int = 0
    vectors: int = 0

    def __add__(self, other: CompactStats) -> CompactStats:
        return CompactStats(
            self.nodes + other.nodes,
            self.events + other.events,
            self.sessions + other.sessions,
            self.vectors + other.vectors,
        )


COMPACT_BATCH = 100
"""Sessions one step of ``compact`` takes at most (each step is one transaction)."""
COMPACT_STEP_NODES = 10_000
"""A step of ``compact`` takes no further session once those it took held this many
nodes, so a step stays short however big its sessions (one session is one step at
least)."""


@dataclass(frozen=True)
class CompactProgress:
    """How far a running ``Store.compact`` has got, after each of its steps.

    Attributes:
        done: sessions examined so far.
        total: sessions stored when compact began (those created later are not
            examined: they are new).
        removed: what it removed so far.
    """

    done: int
    total: int
    removed: CompactStats


Progress = Callable[[CompactProgress], None]
"""A callback ``Store.compact`` calls after each step."""


@dataclass(frozen=True)
class Limits:
    """Input limits, the same on every backend.

    Attributes:
        max_message_bytes: largest encoded message (UTF-8 JSON), default 4 MiB.
        max_batch: most messages in one append, default 1,000.
        max_batch_bytes: largest sum of the encoded messages of one append, default
            64 MiB (a PostgreSQL server drops the connection near 1 GB in one request).
        max_session_id: longest session id in characters, default 512.
        max_snapshot_name: longest snapshot name in characters, default 256.
    """

    max_message_bytes: int = 4 * 1024 * 1024
    max_batch: int = 1000
    max_batch_bytes: int = 64 * 1024 * 1024
    max_session_id: int = 512
    max_snapshot_name: int = 256

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_COUNT:
                raise ConfigurationError(
                    f"Limits: {name} must be an integer from 1 to 2**63-1, not {value!r}"
                )

    def check_session_id(self, value: object) -> str:
        """Return ``value`` if it is a valid session id, else raise InvalidMessageError."""
        return _check_text("session id", value, self.max_session_id)

    def check_snapshot_name(self, value: object, *, user: bool = True) -> str:
        """Validate a snapshot name; users may not create ``auto:`` names."""
        name = _check_text("snapshot name", value, self.max_snapshot_name)
        if user and name.startswith(AUTO_PREFIX):
            raise InvalidMessageError(f"snapshot names starting with {AUTO_PREFIX!r} are reserved")
        return name


def _check_text(what: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidMessageError(f"{what} must not be empty")
    if len(value) > limit:
        raise InvalidMessageError(f"{what} is {len(value)} characters; the limit is {limit}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessageError(f"{what} is not valid Unicode (lone surrogate)") from exc
    return value


def check_count(what: str, value: object) -> int:
    """A count argument (``last``, ``keep_last``, ``keep_events``, ``expect_version``):
    an int from 0 to 2**63-1, what every backend can store; checked before any I/O.

    Raises:
        InvalidArgumentError: naming ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
        raise InvalidArgumentError(f"{what} must be an integer from 0 to 2**63-1, got {shown}")
    return value


def check_message_id(what: str, value: object) -> str:
    """An argument naming a stored message (``expect_message``): a message id, a
    non-empty string of at most :data:`MAX_MESSAGE_ID` characters, valid Unicode;
    checked before any I/O.

    Raises:
        InvalidArgumentError: naming ``what``.
    """
    try:
        return _check_text(what, value, MAX_MESSAGE_ID)
    except InvalidMessageError as exc:
        raise InvalidArgumentError(f"{exc} (a message id)") from None


def check_batch(value: object) -> int:
    """``compact``'s ``batch``: an int from 1 to 2**63-1; checked before any I/O.

    Raises:
        InvalidArgumentError: naming ``batch``.
    """
    batch = check_count("batch", value)
    if batch == 0:
        raise InvalidArgumentError("batch must be an integer from 1 to 2**63-1, got 0")
    return batch


def check_seconds(
    what: str,
    value: object,
    *,
    zero_ok: bool = False,
    at_most: float = sys.float_info.max,
    where: str = "",
) -> None:
    """A duration option: a number of seconds above 0 (or 0 with ``zero_ok``) and at
    most ``at_most``; never a bool, NaN or infinity (which fail the comparisons).

    Raises:
        ConfigurationError: naming ``what`` (after ``where``, e.g. the store URL).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (0 <= value if zero_ok else 0 < value)
        or not value <= at_most
    ):
        bound = "finite" if at_most == sys.float_info.max else f"at most {at_most:g}"
        raise ConfigurationError(
            f"{where}{what} must be seconds {'>= 0' if zero_ok else '> 0'}, {bound}, not {value!r}"
        )
