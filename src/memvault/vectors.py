"""Semantic and hybrid search, without I/O: shared by the sync and async facades.

A store opened with an embedder (``memvault.open(url, embedder=...)``) keeps one
vector per distinct searchable text (:func:`memvault.words.text_of`), keyed by a
hash of that text: a vector is a function of its text alone, so snapshots, rollback,
fork, pop and trim need no reindexing, and visibility is decided at query time from
the full view, as for lexical search. The backend stores the keys and vectors
(:class:`~memvault.backends.base.VectorStore`) and the name of the embedder that
made them (its *space*); a
store whose vectors were made by another embedder is refused with the way out.

Vectors are reclaimed by mark and sweep (:func:`reclaim`, run by ``compact()``
after its steps): every vector whose text no stored message or summary of a live
session has is deleted. Nothing is written beside a vector, so writes cost what
they did, and a backend whose sessions expire by themselves (Redis) or live on
other nodes than the vectors (a Redis Cluster) needs no cross-key bookkeeping.

A search embeds the query (and any visible message that has no stored vector, such
as one written by a client without the embedder, without storing it), ranks the
full view by cosine similarity, brute force (numpy), and fuses that list with the
lexical one by reciprocal rank fusion (:func:`fuse`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, cast

from memvault.backends.base import Stored
from memvault.embedders import Embedder
from memvault.errors import ConfigurationError, InvalidArgumentError
from memvault.messages import Message, Record, decode_message
from memvault.sansio import Operation
from memvault.search import Hit
from memvault.words import body_text, text_of

RRF_C = 60
"""Reciprocal rank fusion's constant: a hit at rank r (from 1) scores 1 / (60 + r)."""
DEPTH = 50
"""Each ranked list fused holds at least this many hits (``3 * k`` if more)."""
CACHE = 100_000
"""Vectors a store handle keeps in memory (about 1 KB each at 256 dimensions)."""
KEYS = 32_000_000
"""Characters of bodies a store handle keeps to know their texts' keys undecoded."""


def text_key(text: str) -> str:
    """The key of a searchable text's vector."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:
        raise ConfigurationError(
            "semantic search needs numpy: pip install 'memvault[recall]'"
        ) from exc
    return numpy


def fuse(lists: Sequence[Sequence[Hit]], k: int, c: int = RRF_C) -> list[Hit]:
    """Reciprocal rank fusion: each hit scores the sum over ``lists`` of
    ``1 / (c + rank)`` (rank from 1) where it appears, identified by session and
    position; the ``k`` best, best first, ties in order of first appearance."""
    scores: dict[tuple[str, int | None], float] = {}
    first: dict[tuple[str, int | None], Hit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, 1):
            key = (hit.session_id, hit.position)
            first.setdefault(key, hit)
            scores[key] = scores.get(key, 0.0) + 1.0 / (c + rank)
    order = sorted(first, key=lambda key: -scores[key])
    return [replace(first[key], score=scores[key]) for key in order[:k]]


@dataclass
class Index:
    """A store handle's semantic side: its embedder, the space it names, and the
    vectors read so far (immutable by construction, so never stale)."""

    embedder: Embedder
    checked: bool = False
    unclaimed: bool = False
    cache: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # body -> its text's key
    held: int = 0  # the characters of keys' bodies
    table: tuple[list[str], Any] | None = None  # the last keys ranked, their vectors

    @property
    def space(self) -> str:
        return f"{self.embedder.name}|{self.embedder.dims}"

    def check_space(self, stored: str | None) -> None:
        """Note the store's space (None: no embedder recorded yet, so the first write
        records ours); raises if another embedder made its vectors."""
        if stored is not None and stored != self.space:
            raise ConfigurationError(
                f"this store's vectors were made by embedder {stored!r}, not {self.space!r}: "
                "open it with that embedder, or replace them with "
                "`memvault reindex --url URL --embedder NEW --replace`"
            )
        self.checked, self.unclaimed = True, stored is None

    def vectors(self, texts: list[str], raw: Any) -> Any:
        """The embedder's answer for ``texts`` as unit float32 rows; raises
        InvalidArgumentError (before any write) if it is not ``len(texts)`` vectors
        of ``dims`` finite floats."""
        np = _numpy()
        try:
            matrix = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"embedder {self.embedder.name!r} returned something that is not vectors: {exc}"
            ) from exc
        want = (len(texts), self.embedder.dims)
        if matrix.shape != want or not np.isfinite(matrix).all():
            raise InvalidArgumentError(
                f"embedder {self.embedder.name!r} returned an array of shape {matrix.shape} "
                f"for {len(texts)} texts, not {want} finite floats"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)

    # Writes: embed each record's text, then attach (key, vector) to it.
    @staticmethod
    def texts_of(session_id: str, records: Sequence[Record]) -> list[str]:
        return [text_of(decode_message(session_id, 0, r.body)) for r in records]

    def entries(self, texts: list[str], raw: Any) -> list[tuple[str, bytes]]:
        """What is stored for ``texts``, given the embedder's answer ``raw``: each
        text's key and unit vector as little-endian float32 bytes."""
        matrix = self.vectors(texts, raw)
        return [
            (text_key(t), row.astype("<f4").tobytes()) for t, row in zip(texts, matrix, strict=True)
        ]

    def attach(self, records: Sequence[Record], texts: list[str], raw: Any) -> list[Record]:
        return [
            r._replace(vector=entry)
            for r, entry in zip(records, self.entries(texts, raw), strict=True)
        ]

    # Searches: the docs of the full views, the keys to read, then the texts to embed.
    def docs(self, views: Iterable[tuple[str, list[Stored]]]) -> Docs:
        """The docs of the full views as stored (session id, ``(depth, body)``s): a
        body seen before is not decoded again (its key is remembered: a function of
        the body), so a search decodes only the bodies it has not seen and its hits."""
        keys = self.keys
        if self.held > KEYS:
            keys.clear()
            self.held = 0
        parts = []
        for sid, stored in views:
            found = list(map(keys.get, [body for _, body in stored]))  # no loop in Python
            if None in found:
                for i, key in enumerate(found):
                    if key is None:
                        depth, body = stored[i]
                        key = found[i] = keys.get(body)  # the same body earlier in the view
                        if key is None:
                            key = found[i] = keys[body] = text_key(
                                text_of(decode_message(sid, depth, body))
                            )
                            self.held += len(body)
            parts.append((sid, stored, cast(list[str], found)))  # no None left
        return Docs(parts)

    def unknown(self, docs: Docs) -> list[str]:
        return list(set(docs.keys).difference(self.cache))

    def remember(self, found: dict[str, bytes]) -> None:
        np = _numpy()
        if len(self.cache) + len(found) > CACHE:
            self.cache.clear()
        for key, blob in found.items():
            self.cache[key] = np.frombuffer(blob, dtype="<f4")

    def to_embed(self, query: str, docs: Docs) -> list[str]:
        """The query, then the texts of the docs with no vector stored."""
        if not set(docs.keys).difference(self.cache):
            return [query]
        return [query, *{d.text(): None for d in docs if d.key not in self.cache}]

    def table_of(self, keys: list[str], fresh: dict[str, Any]) -> Any:
        """The vectors of ``keys`` as a matrix; the last one built of stored vectors
        only is kept and reused while the keys are the same (stacking 10,000 rows
        took about as long as the rest of the ranking)."""
        if not fresh and self.table is not None and self.table[0] == keys:
            return self.table[1]
        table = _numpy().stack([self.cache.get(key, fresh.get(key)) for key in keys])
        if not fresh:
            self.table = (keys, table)
        return table

    def rank(self, texts: list[str], raw: Any, docs: Docs, lexical: list[Hit], k: int) -> list[Hit]:
        """The ``k`` best hits: the semantic list (cosine to the query, positive
        only) fused with the lexical one; only the semantic list's bodies are decoded."""
        np = _numpy()
        matrix = self.vectors(texts, raw)
        fresh = {text_key(t): row for t, row in zip(texts[1:], matrix[1:], strict=True)}
        best_of = depth(k)
        if docs:
            table = self.table_of(docs.keys, fresh)
            # einsum, not `@`: a multi-threaded BLAS on a busy machine made this
            # product 40x slower (58 vs 1.3 ms at 10,000 rows, load average 18)
            scores = np.einsum("ij,j->i", table, matrix[0])
            best = np.argsort(-scores, kind="stable")[:best_of]
            semantic = [docs[i].hit(float(scores[i])) for i in best if scores[i] > 0]
        else:
            semantic = []
        return fuse([lexical[:best_of], semantic], k)


class Docs:
    """The messages of the full views searched, as stored, with their text keys:
    ``keys`` in order; a :class:`Doc` is made only for the messages used (making one
    per message took as long as the rest of the search)."""

    def __init__(self, parts: list[tuple[str, list[Stored], list[str]]]) -> None:
        self.parts = parts  # (session id, its full view as stored, their keys)
        self.keys = parts[0][2] if len(parts) == 1 else [k for *_, ks in parts for k in ks]
        self.starts = list(itertools.accumulate((len(ks) for *_, ks in parts), initial=0))

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> Doc:
        i = int(i)  # a numpy integer (argsort's) would make a numpy position
        part = bisect.bisect_right(self.starts, i) - 1
        sid, stored, keys = self.parts[part]
        at = i - self.starts[part]
        depth, body = stored[at]
        return Doc(sid, at + 1, depth, body, keys[at])

    def __iter__(self) -> Iterator[Doc]:
        for sid, stored, keys in self.parts:
            for at, ((depth, body), key) in enumerate(zip(stored, keys, strict=True), 1):
                yield Doc(sid, at, depth, body, key)


class Doc(NamedTuple):
    """One message of a full view searched, as stored, with its text's key."""

    session_id: str
    position: int
    depth: int
    body: str
    key: str

    def message(self) -> Message:
        return decode_message(self.session_id, self.depth, self.body)

    def text(self) -> str:
        return text_of(self.message())

    def hit(self, score: float) -> Hit:
        return Hit(self.session_id, self.message(), self.position, score)


def depth(k: int) -> int:
    """How many hits of each ranked list are fused to find the best ``k``."""
    return max(DEPTH, 3 * k)


def reclaim(now: float) -> Operation[tuple[Any, ...], int]:
    """Delete the vectors no stored message or summary of a live session uses (mark
    and sweep); returns how many. It yields ``(VectorStore method, *args)`` requests
    (:func:`memvault.sansio.drive` runs it, sync or async).

    The keys are listed first, so a vector stored meanwhile is never deleted; one a
    concurrent writer reuses for a text whose last user was gone may be, and search
    then embeds that text at query time (``memvault reindex`` stores it again): a key
    is its text's hash, so no text ever gets another's vector. Costs one read of
    every stored message: O(store).
    """
    stored = yield ("vector_keys",)
    if not stored:
        return 0
    used: set[str | None] = set()
    for sid in (yield ("sessions", now)):
        used.update(map(body_key, (yield ("node_bodies", sid, now))))
    dead = [key for key in stored if key not in used]
    if dead:
        yield ("drop_vectors", dead)
    return len(dead)


def body_key(body: str) -> str | None:
    """The key of a stored message's text, read from its envelope with ``json`` (2.5x
    faster than decoding it); None for a body that cannot be read (search raises on
    it, naming it)."""
    try:
        return text_key(body_text(body))
    except (ValueError, LookupError, TypeError, AttributeError, RecursionError):
        return None


def request(backend: Any) -> Any:
    """How :func:`reclaim`'s requests are performed on ``backend`` (awaitable if it is
    async)."""
    return lambda req: getattr(backend, req[0])(*req[1:])


__all__ = [
    "CACHE",
    "DEPTH",
    "KEYS",
    "RRF_C",
    "Doc",
    "Docs",
    "Index",
    "body_key",
    "depth",
    "fuse",
    "reclaim",
    "request",
    "text_key",
]
