"""Lexical search over histories: the words, the hits, and BM25 by scan.

:meth:`memvault.Session.search` and :meth:`memvault.Store.search` ask the backend's
index first: a backend that has one implements ``search(session_ids, terms, k,
include_hidden, now) -> list[Match]`` (memory: a BM25 inverted index; SQLite: FTS5;
see ``docs/recall.md``). A backend without it
(Redis, a third party's) is searched by :func:`rank`, a scan: the full view of each
session searched is read and its messages ranked with Okapi BM25 (k1 = 1.2,
b = 0.75). The scan costs a read of every message searched, and it sees only the
full view, so it cannot find hidden messages (``include_hidden``).

A query is only ever words (:mod:`memvault.words`: quotes, operators, NUL... are
separators), so no query can reach a backend's own query syntax. The indexes store
these same words, so every backend agrees on what matches.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memvault.backends.base import Match
from memvault.errors import ConfigurationError, InvalidArgumentError
from memvault.messages import Message, decode_message
from memvault.model import check_count
from memvault.words import K1, B, text_of, words

MAX_TERMS = 1024
"""The most distinct words a query may have (a longer one is refused: an index
would match it against every message)."""


@dataclass(frozen=True)
class Hit:
    """One search result.

    Attributes:
        session_id: the session the message belongs to.
        message: the message (a summary is a message too).
        position: its position in the session's full view (``history(full=True)``),
            from 1; None for a hidden message (``include_hidden=True``).
        score: its relevance to the query, higher is better; compare scores of one
            search only. Lexical: Okapi BM25 (k1 1.2, b 0.75, idf
            ``ln(1 + (N - n + 0.5) / (n + 0.5))``) over every stored message and
            summary of the store (memory, PostgreSQL) or over the full views searched
            (the scan: Redis, a backend without an index); SQLite: FTS5's ``bm25()``,
            the same but for its idf, ``ln((N - n + 0.5) / (n + 0.5))``, and 1e-6 for
            a word in half the documents or more. With an embedder: the reciprocal
            rank fusion score (:func:`memvault.vectors.fuse`).
        hidden: whether the message is hidden (popped, trimmed, cleared, rolled back,
            or an undone summary): found only with ``include_hidden=True``.
    """

    session_id: str
    message: Message
    position: int | None
    score: float
    hidden: bool = False


def check_query(query: object, k: object) -> tuple[list[str], int]:
    """The query's distinct words (in order) and ``k``, checked before any read."""
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a string, not {type(query).__name__}")
    terms = list(dict.fromkeys(words(query)))
    if not terms:
        shown = repr(query) if len(query) <= 40 else f"{query[:37]!r}..."
        raise InvalidArgumentError(f"query {shown} has no word to search for")
    if len(terms) > MAX_TERMS:
        raise InvalidArgumentError(
            f"query has {len(terms)} distinct words; the limit is {MAX_TERMS}"
        )
    return terms, check_count("k", k)


def check_sessions(sessions: object) -> list[str]:
    """``sessions=`` as a list of ids (a lone string is refused, not split)."""
    if isinstance(sessions, (str, bytes)) or not isinstance(sessions, Iterable):
        raise InvalidArgumentError("sessions must be a list of session ids")
    return list(sessions)


def hits(matches: Iterable[Match]) -> list[Hit]:
    """A backend's matches as hits (CorruptRecordError if one cannot be decoded)."""
    return [
        Hit(
            m.session_id,
            decode_message(m.session_id, m.depth, m.body),
            m.position,
            m.score,
            m.hidden,
        )
        for m in matches
    ]


def no_index(backend: str, hybrid: bool = False) -> ConfigurationError:
    """The error for ``include_hidden=True`` where the full views are searched (a
    backend without a lexical index, named ``backend``, or a store with an embedder)."""
    why = (
        "hybrid search (embedder=) ranks the full views"
        if hybrid
        else f"{backend} has no search index: search scans the full views"
    )
    return ConfigurationError(
        f"{why}, which hold no hidden message, so include_hidden=True cannot be answered"
    )


def rank(terms: Sequence[str], histories: Iterable[tuple[str, list[Message]]], k: int) -> list[Hit]:
    """The ``k`` best hits of ``terms`` among the messages of ``histories`` (session
    id, full view), best first; ties keep the order of the histories."""
    docs = [
        (sid, pos, m, Counter(words(text_of(m))))
        for sid, history in histories
        for pos, m in enumerate(history, 1)
    ]
    if not docs or k == 0:
        return []
    lengths = [sum(counts.values()) for *_, counts in docs]
    average = sum(lengths) / len(docs) or 1.0
    unique = set(terms)
    having = {t: sum(1 for *_, counts in docs if t in counts) for t in unique}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in having.items()}
    hits = []
    for (sid, pos, message, counts), length in zip(docs, lengths, strict=True):
        score = sum(
            idf[t] * counts[t] * (K1 + 1) / (counts[t] + K1 * (1 - B + B * length / average))
            for t in unique
            if t in counts
        )
        if score > 0:
            hits.append(Hit(sid, message, pos, score))
    hits.sort(key=lambda h: -h.score)
    return hits[:k]


__all__ = ["MAX_TERMS", "Hit", "check_query", "check_sessions", "hits", "no_index", "rank"]
