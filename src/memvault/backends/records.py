"""Decoding the stored records other than messages (events, snapshots), shared by
every backend: damaged data becomes :class:`~memvault.errors.CorruptRecordError`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from memvault.errors import CorruptRecordError

T = TypeVar("T")


def decoded(session_id: str, what: str, parse: Callable[[], T]) -> T:
    """``parse()`` of a stored record other than a message (an event, a snapshot);
    whatever it raises on damaged data becomes CorruptRecordError naming ``what``."""
    try:
        return parse()
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
    ) as exc:
        raise CorruptRecordError(session_id, None, f"{what} cannot be decoded ({exc})") from exc


def json_object(text: str | bytes) -> dict[str, object]:
    """A stored JSON object (an event's detail); ValueError if it is anything else."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {type(value).__name__}")
    return value
