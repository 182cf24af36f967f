"""Listing sessions a page at a time: arguments, cursors and the in-Python order.

No I/O. ``Store.sessions_page`` checks its arguments here (before any I/O) into
a :class:`PageQuery`, asks the backend for ``limit + 1`` sessions after the
cursor's position, and turns the answer into a :class:`SessionPage` whose cursor
points after its last session.

Order: by a key (``id``, ``version``, ``length``, ``updated``, ``expires``), then
by id, ascending or descending; ids compare by code point. ``expires`` puts the
sessions that never expire after every date (ascending). Paging is keyset
paging: a cursor holds the position (the last session's key and id), never an
offset, so sessions inserted or deleted during a walk shift nothing: every
session that exists throughout the walk, and whose key does not change meanwhile,
is listed exactly once. A session written during a walk ordered by a key it
changes (``version``, ``length``, ``updated``, ``expires``) may move past the
cursor or behind it; ordered by ``id`` it never moves.

Each backend reports, with each session, its key as the backend compares it (a
float kept exactly): the cursor carries that, so a page starts exactly after the
last one whatever rounding ``SessionInfo``'s datetimes apply.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memvault.errors import InvalidArgumentError
from memvault.model import SessionInfo

ORDERS = ("id", "version", "length", "updated", "expires")
"""What a page can be ordered by (then by id)."""
MAX_LIMIT = 10_000
"""The most sessions one page holds."""
MAX_MATCH = 512
"""The longest ``match`` (a session id's length)."""
NEVER = 1e308
"""The ``expires`` key of a session that never expires: after every date (a cursor
is JSON, which has no infinity; the SQL indexes use the same number)."""

Key = int | float | None
"""A session's position key as its backend reports it (a number; for the ``id``
order, None: the id is the key)."""
Listed = tuple[SessionInfo, Key]
"""A listed session and its key in the query's order."""


@dataclass(frozen=True)
class SessionPage:
    """One page of :meth:`memvault.Store.sessions_page`.

    Attributes:
        sessions: the live sessions of the page, in the order asked.
        cursor: pass it back as ``cursor=`` for the next page; None after the last.
    """

    sessions: list[SessionInfo]
    cursor: str | None


@dataclass(frozen=True)
class PageQuery:
    """A checked page request, as the backend receives it.

    Attributes:
        limit: how many sessions to return at most (the facade asks one more than
            the page size, to know whether there is a next page).
        order: one of :data:`ORDERS`.
        descending: the order reversed (ties by id reversed too).
        match: only ids containing this text (case-sensitive); "" for all.
        after: the position to start after, ``(key, session id)``; None: the start.
    """

    limit: int
    order: str = "id"
    descending: bool = False
    match: str = ""
    after: tuple[Key, str] | None = None


def check_page(
    limit: object, cursor: object, order: object, descending: object, match: object
) -> PageQuery:
    """A page request's arguments, checked before any I/O.

    Raises:
        InvalidArgumentError: a bad page size, order, match, or a cursor that is
            not one this function's pages gave (or that was given with another
            order or match than its own).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit must be an integer from 1 to {MAX_LIMIT:,}, got {_shown(limit)}"
        )
    if order not in ORDERS:
        raise InvalidArgumentError(f"order must be one of {', '.join(ORDERS)}; got {_shown(order)}")
    if not isinstance(descending, bool):
        raise InvalidArgumentError(f"descending must be True or False, got {_shown(descending)}")
    match = "" if match is None else match
    if not isinstance(match, str) or len(match) > MAX_MATCH:
        raise InvalidArgumentError(
            f"match must be a string of at most {MAX_MATCH} characters, got {_shown(match)}"
        )
    query = PageQuery(limit + 1, str(order), descending, match)
    if cursor is None:
        return query
    return PageQuery(query.limit, query.order, descending, match, _position(cursor, query))


def page_of(query: PageQuery, listed: list[Listed]) -> SessionPage:
    """The page the backend's answer to ``query`` makes (``query.limit - 1`` sessions
    at most), and the cursor after it if the backend found more."""
    size = query.limit - 1
    if len(listed) <= size:
        return SessionPage([info for info, _ in listed], None)
    last, key = listed[size - 1]
    state = [query.order, query.descending, query.match, key, last.session_id]
    text = json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    cursor = base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")
    return SessionPage([info for info, _ in listed[:size]], cursor)


def _position(cursor: object, query: PageQuery) -> tuple[Key, str]:
    bad = InvalidArgumentError(f"cursor is not a cursor a page of sessions gave: {_shown(cursor)}")
    if not isinstance(cursor, str) or not cursor or len(cursor) > 8192:
        raise bad
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8")
        order, descending, match, key, session_id = json.loads(text)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise bad from exc
    if not isinstance(session_id, str) or not _key_ok(key, str(order)):
        raise bad
    if (order, descending, match) != (query.order, query.descending, query.match):
        raise InvalidArgumentError(
            f"this cursor continues a listing by {order} "
            f"({'descending' if descending else 'ascending'}, match {match!r}): pass the "
            "same order, descending and match with it"
        )
    return key, session_id


def _key_ok(key: object, order: str) -> bool:
    if order == "id":
        return key is None
    if isinstance(key, float):
        return math.isfinite(key)
    return isinstance(key, int) and not isinstance(key, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def key_of(info: SessionInfo, order: str, exact: tuple[float, float | None]) -> Key:
    """``info``'s key in ``order`` for a backend that keeps times as floats:
    ``exact`` is the stored ``(updated_at, expires_at)``; an expiry of None (never)
    is :data:`NEVER`."""
    updated, expires = exact
    return {
        "id": None,
        "version": info.version,
        "length": info.length,
        "updated": updated,
        "expires": NEVER if expires is None else expires,
    }[order]


def select(query: PageQuery, listed: Iterable[Listed]) -> list[Listed]:
    """The page ``query`` asks of all the live sessions ``listed`` (with their keys):
    filtered, ordered and cut in Python, for the backends that keep no index
    (O(sessions) per page)."""

    def position(item: Listed) -> tuple[Any, str]:
        return (0 if item[1] is None else item[1]), item[0].session_id

    chosen = sorted(
        (item for item in listed if query.match in item[0].session_id),
        key=position,
        reverse=query.descending,
    )
    if query.after is not None:
        start = (0 if query.after[0] is None else query.after[0]), query.after[1]
        chosen = [
            item
            for item in chosen
            if (position(item) < start if query.descending else position(item) > start)
        ]
    return chosen[: query.limit]


__all__ = [
    "MAX_LIMIT",
    "NEVER",
    "ORDERS",
    "Key",
    "Listed",
    "PageQuery",
    "SessionPage",
    "check_page",
    "key_of",
    "page_of",
    "select",
]
