"""memvault: durable, concurrency-safe conversation memory for LLM agents.

>>> import memvault
>>> with memvault.open("memory://") as store:
...     s = store.session("user-42")
...     s.append([memvault.Message.user("My name is Wang")])
1
"""

from memvault.aio import AsyncSession, AsyncStore, open_async
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    ConflictError,
    CorruptRecordError,
    DuplicateMessageError,
    InvalidArgumentError,
    InvalidMessageError,
    MemvaultError,
    OutcomeUnknownError,
    SnapshotExistsError,
    SnapshotNotFoundError,
    VersionNotFoundError,
)
from memvault.messages import Message, ToolCall
from memvault.model import CompactProgress, CompactStats, Event, Limits, SessionInfo, Snapshot
from memvault.paging import SessionPage
from memvault.search import Hit
from memvault.store import Session, Store, open

__version__ = "0.1.0"

__all__ = [
    "AsyncSession",
    "AsyncStore",
    "BackendError",
    "BackendUnavailableError",
    "CompactProgress",
    "CompactStats",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "DuplicateMessageError",
    "Event",
    "Hit",
    "InvalidArgumentError",
    "InvalidMessageError",
    "Limits",
    "MemvaultError",
    "Message",
    "OutcomeUnknownError",
    "Session",
    "SessionInfo",
    "SessionPage",
    "Snapshot",
    "SnapshotExistsError",
    "SnapshotNotFoundError",
    "Store",
    "ToolCall",
    "VersionNotFoundError",
    "open",
    "open_async",
]
