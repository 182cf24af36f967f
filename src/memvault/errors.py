"""The memvault exception tree.

Every error memvault raises is a :class:`MemvaultError`::

    MemvaultError
    ├── ConfigurationError        bad URL, unknown scheme or option, missing optional
    │                             dependency (the message names the extra to install)
    ├── InvalidMessageError       bad input; nothing was written (also a ValueError)
    ├── InvalidArgumentError      a count (last=, keep_last=, keep_events=, expect_version)
    │                             negative, not an int, or >= 2**63; nothing was done
    │                             (also a ValueError)
    ├── ConflictError             expect_version did not match, or fork onto an existing id
    ├── DuplicateMessageError     a batch mixing stored and new message ids, or repeating one
    ├── SnapshotNotFoundError     rollback/fork to a snapshot that does not exist
    ├── SnapshotExistsError       snapshot() with a name already taken
    ├── VersionNotFoundError      history(at_version=N): no such version, or compact
    │                             dropped its event
    ├── CorruptRecordError        stored data that cannot be decoded; names session and depth
    └── BackendError              the backend failed; the driver's error is __cause__
        ├── BackendUnavailableError   nothing was applied (e.g. connection refused)
        └── OutcomeUnknownError       it may have been applied (e.g. timeout after sending);
                                      retrying the same messages (same ids) is safe
"""

from __future__ import annotations


class MemvaultError(Exception):
    """Base class of every error raised by memvault."""


class ConfigurationError(MemvaultError):
    """The store cannot be opened as configured (URL, options, extras, schema)."""


class InvalidMessageError(MemvaultError, ValueError):
    """The input was rejected before anything was written."""


class InvalidArgumentError(MemvaultError, ValueError):
    """A count argument (``last``, ``keep_last``, ``keep_events``, ``expect_version``)
    is not an int in 0..2**63-1, or ``expect_message`` is not a message id; refused
    before any I/O, the same on every backend."""


class ConflictError(MemvaultError):
    """The session is not in the state the caller expected."""


class DuplicateMessageError(MemvaultError):
    """A batch mixes stored and new message ids, or repeats an id; nothing was written."""


class SnapshotNotFoundError(MemvaultError, KeyError):
    """No snapshot of that name exists in the session."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class SnapshotExistsError(MemvaultError):
    """A snapshot of that name already exists; snapshots are never overwritten."""


class VersionNotFoundError(MemvaultError, LookupError):
    """``history(at_version=N)``: the session never reached version N, or
    ``compact(keep_events=...)`` dropped the event that recorded it."""


class CorruptRecordError(MemvaultError):
    """A stored record could not be decoded.

    Attributes:
        session_id: the session the record belongs to.
        depth: the record's position in the conversation chain (1 = first message);
            None for a record that is not a message (an event, a snapshot), which the
            reason names.
        reason: what is damaged, and how.
    """

    def __init__(self, session_id: str, depth: int | None, reason: str) -> None:
        where = "" if depth is None else f" at depth {depth}"
        super().__init__(f"corrupt record in session {session_id!r}{where}: {reason}")
        self.session_id = session_id
        self.depth = depth
        self.reason = reason


class BackendError(MemvaultError):
    """The backend failed; the driver's exception is ``__cause__``."""


class BackendUnavailableError(BackendError):
    """The backend could not be reached; nothing was applied."""


class OutcomeUnknownError(BackendError):
    """The request may or may not have been applied.

    Retrying an append with the same messages (same ids) is safe: it is idempotent.
    """


# The texts of the errors an operation raises, built here so that every backend (the
# Python engine, the Redis scripts' and the PostgreSQL functions' translations) says
# the same thing in the same words.


def version_conflict(session_id: str, current: int, expected: int) -> ConflictError:
    """``expect_version`` did not match."""
    return ConflictError(f"session {session_id!r} is at version {current}, expected {expected}")


def not_stored(session_id: str, msg_id: str) -> ConflictError:
    """``expect_message`` is not stored in the session."""
    return ConflictError(f"session {session_id!r} does not store message {msg_id!r}")


def session_exists(session_id: str) -> ConflictError:
    """A fork onto a live session."""
    return ConflictError(f"session {session_id!r} already exists")


def duplicate_ids(session_id: str, stored: int, total: int, example: str) -> DuplicateMessageError:
    """A batch mixing stored and new ids; ``example`` is the smallest stored id."""
    return DuplicateMessageError(
        f"session {session_id!r}: {stored} of {total} message ids are already stored "
        f"(e.g. {example!r}); nothing was written"
    )


def snapshot_exists(session_id: str, name: str) -> SnapshotExistsError:
    """A snapshot name already taken in the session."""
    return SnapshotExistsError(f"session {session_id!r} already has snapshot {name!r}")


def unknown_through(session_id: str, through: str) -> InvalidMessageError:
    """summarize(through=...) names no message of the session."""
    return InvalidMessageError(
        f"session {session_id!r} has no message {through!r} to summarize through; "
        "nothing was written"
    )


def hidden_through(session_id: str, through: str) -> InvalidMessageError:
    """summarize(through=...) names a message outside the visible history."""
    return InvalidMessageError(
        f"message {through!r} is not in the visible history of session {session_id!r} "
        "(popped, trimmed, cleared, rolled back or itself a summary); nothing was written"
    )


def summarized_through(session_id: str, through: str) -> InvalidMessageError:
    """summarize(through=...) names a message the current summary already covers."""
    return InvalidMessageError(
        f"message {through!r} of session {session_id!r} is already summarized: a new "
        "summary must reach past the previous one; nothing was written"
    )


def snapshot_missing(session_id: str, name: str) -> SnapshotNotFoundError:
    """No snapshot of that name in the session."""
    return SnapshotNotFoundError(f"session {session_id!r} has no snapshot {name!r}")


def message_missing(session_id: str, depth: int) -> CorruptRecordError:
    """A node the session's pointers reach is not stored."""
    return CorruptRecordError(session_id, depth, "the message is missing")


def broken_chain(session_id: str, depth: int) -> CorruptRecordError:
    """A walk of a chain found no node at ``depth`` one level below the last (a node
    missing, its own parent, or linked into another branch)."""
    return CorruptRecordError(
        session_id,
        depth,
        "the chain is broken here (a message is missing or linked to the wrong parent)",
    )


def damaged_snapshot(session_id: str, name: str) -> CorruptRecordError:
    """A snapshot whose record cannot be decoded or whose pointers cannot be right: a
    length, base or head below 0, a head beyond the session's nodes, a head of none
    with messages (or a head with none)."""
    return CorruptRecordError(
        session_id, None, f"snapshot {name!r} is damaged: its head, base and length cannot be right"
    )


def not_utf8(session_id: str, depth: int) -> CorruptRecordError:
    """A stored body whose bytes are not UTF-8 text."""
    return CorruptRecordError(session_id, depth, "not UTF-8 text")


__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "DuplicateMessageError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "MemvaultError",
    "OutcomeUnknownError",
    "SnapshotExistsError",
    "SnapshotNotFoundError",
    "VersionNotFoundError",
]
