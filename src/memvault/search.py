"""Lexical search over histories: BM25 ranking, computed by scanning the full view.

This is the search every backend has today: :meth:`memvault.Session.search` and
:meth:`memvault.Store.search` read the full view of each session searched (every
visible message, summarized ones included, and the visible summaries) and rank its
messages against the query with Okapi BM25 (k1 = 1.2, b = 0.75) over the words of
their text. It costs a read of every message searched, so it suits sessions of
thousands of messages, not millions; indexed search (SQLite FTS5, PostgreSQL
full-text) is not built yet. Hidden messages (popped, trimmed, cleared, rolled back)
are never found: they are not in the full view.

Words are runs of Unicode letters and digits, compared in lower case (``casefold``).
A message's text is its content (the text parts of a list content), its name, and
its tool calls' names and arguments.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memvault.errors import InvalidArgumentError
from memvault.messages import Message
from memvault.model import check_count

_WORD = re.compile(r"[^\W_]+")
K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Hit:
    """One search result.

    Attributes:
        session_id: the session the message belongs to.
        message: the message (a summary is a message too).
        position: its position in the session's full view (``history(full=True)``),
            from 1.
        score: its BM25 score for the query; higher is better.
    """

    session_id: str
    message: Message
    position: int
    score: float


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded."""
    return _WORD.findall(text.casefold())


def text_of(message: Message) -> str:
    """The searchable text of a message."""
    parts: list[str] = []
    if isinstance(message.content, str):
        parts.append(message.content)
    elif isinstance(message.content, list):
        parts += [text for p in message.content
                  if isinstance(p, dict) and isinstance(text := p.get("text"), str)]
    if message.name:
        parts.append(message.name)
    for call in message.tool_calls:
        parts += [call.name, call.arguments]
    return "\n".join(parts)


def check_query(query: object, k: object) -> tuple[list[str], int]:
    """The query's words and ``k``, checked before any read."""
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a string, not {type(query).__name__}")
    terms = words(query)
    if not terms:
        raise InvalidArgumentError(f"query {query!r} has no word to search for")
    return terms, check_count("k", k)


def check_sessions(sessions: object) -> list[str]:
    """``sessions=`` as a list of ids (a lone string is refused, not split)."""
    if isinstance(sessions, (str, bytes)) or not isinstance(sessions, Iterable):
        raise InvalidArgumentError("sessions must be a list of session ids")
    return list(sessions)


def rank(terms: Sequence[str], histories: Iterable[tuple[str, list[Message]]],
         k: int) -> list[Hit]:
    """The ``k`` best hits of ``terms`` among the messages of ``histories`` (session
    id, full view), best first; ties keep the order of the histories."""
    docs = [(sid, pos, m, Counter(words(text_of(m))))
            for sid, history in histories for pos, m in enumerate(history, 1)]
    if not docs or k == 0:
        return []
    lengths = [sum(counts.values()) for *_, counts in docs]
    average = sum(lengths) / len(docs) or 1.0
    unique = set(terms)
    having = {t: sum(1 for *_, counts in docs if t in counts) for t in unique}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in having.items()}
    hits = []
    for (sid, pos, message, counts), length in zip(docs, lengths, strict=True):
        score = sum(idf[t] * counts[t] * (K1 + 1)
                    / (counts[t] + K1 * (1 - B + B * length / average))
                    for t in unique if t in counts)
        if score > 0:
            hits.append(Hit(sid, message, pos, score))
    hits.sort(key=lambda h: -h.score)
    return hits[:k]


__all__ = ["Hit", "check_query", "check_sessions", "rank", "text_of", "words"]
