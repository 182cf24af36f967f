"""The records of a lost-write history file, typed.

On disk a history is JSON lines, one record each, its kind in field ``e`` and its
fields under short keys (``w`` writer, ``t`` turn, ``r`` reader), so that long runs
stay small and ``memvault torture`` can write the same records. :func:`parse` reads
one into the classes below, which the audit (:mod:`memvault.checks.report`) works on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["ok", "failed", "unknown"]

# One small frozen dataclass per kind of record: alike in shape only.


@dataclass(frozen=True)
class RunStarted:
    """``run``: the run's parameters (URL with the password redacted, counts, ...)."""

    params: dict[str, Any]


@dataclass(frozen=True)
class AppendCalled:
    """``invoke``: writer ``writer`` is about to append turn ``turn``, these ids."""

    writer: int
    turn: int
    ids: list[str]


@dataclass(frozen=True)
class AppendEnded:
    """``ok`` / ``failed`` / ``unknown``: how that append ended."""

    writer: int
    turn: int
    outcome: Outcome


@dataclass(frozen=True)
class HistoryRead:
    """``read``: a reader saw these ids; ``bad``: those whose checksum failed."""

    reader: int
    ids: list[str]
    bad: list[str]


@dataclass(frozen=True)
class ReadFailed:
    """``read_error`` (during the run) or ``final_error`` (the final read)."""

    final: bool
    corrupt: bool
    error: str


@dataclass(frozen=True)
class StoredMessage:
    """A message of the final history: its id, role, content and stored checksum."""

    id: str
    role: str
    content: Any
    sum: str | None


@dataclass(frozen=True)
class FinalHistory:
    """``final``: the session's history after the run."""

    messages: list[StoredMessage]


Record = RunStarted | AppendCalled | AppendEnded | HistoryRead | ReadFailed | FinalHistory


def parse(record: dict[str, Any]) -> Record | None:
    """The typed record of one history line; None for a kind the audit does not read
    (another tool's records)."""
    e = record.get("e")
    if e == "run":
        return RunStarted({k: v for k, v in record.items() if k != "e"})
    if e == "invoke":
        return AppendCalled(record["w"], record["t"], list(record["ids"]))
    if e in ("ok", "failed", "unknown"):
        return AppendEnded(record["w"], record["t"], e)
    if e == "read":
        return HistoryRead(record["r"], list(record["ids"]), list(record.get("bad", [])))
    if e in ("read_error", "final_error"):
        return ReadFailed(
            e == "final_error", bool(record.get("corrupt")), str(record.get("error", ""))
        )
    if e == "final":
        return FinalHistory(
            [
                StoredMessage(m["id"], m["role"], m["content"], m.get("sum"))
                for m in record["messages"]
            ]
        )
    return None


def parse_all(records: Iterable[dict[str, Any]]) -> list[Record]:
    """The typed records of a history, in order (other tools' records left out)."""
    return [typed for r in records if (typed := parse(r)) is not None]
