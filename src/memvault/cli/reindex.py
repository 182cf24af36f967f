"""``memvault reindex``: store the search vectors a store is missing.

Every live session's full view (what search ranks) is read, the texts that have no
stored vector are embedded in batches of ``batch`` texts, and each batch is stored
as soon as it is embedded. Vectors are keyed by their text, so a run that is killed
loses at most the batch in flight, and the next run embeds only what is still
missing: nothing is duplicated. ``replace`` first deletes every stored vector and
records the new embedder (how a store moves to another model).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from memvault.backends.base import VectorStore
from memvault.embedders import Embedder, as_embedder
from memvault.errors import ConfigurationError
from memvault.store import Store, now, open_store
from memvault.vectors import Index

BATCH = 256


@dataclass(frozen=True)
class ReindexStats:
    """What a run did: sessions read, texts seen, and how many were embedded."""

    sessions: int
    texts: int
    embedded: int


def load_embedder(spec: str) -> Embedder:
    """``"wordllama"``, or ``"module:attr"`` naming an embedder (a class is
    instantiated with no argument); ConfigurationError if it cannot be loaded."""
    if spec == "wordllama":
        return as_embedder(spec)
    module, _, attr = spec.partition(":")
    try:
        obj: Any = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot load embedder {spec!r} (wordllama or module:attr): {exc}"
        ) from exc
    return as_embedder(obj() if isinstance(obj, type) else obj)


def open_for_reindex(
    url: str | None, embedder: Embedder, *, replace: bool, options: dict[str, Any] | None = None
) -> Store:
    """The store opened with ``embedder``; ``replace``: its vectors deleted first and
    ``embedder`` recorded as the one that makes them."""
    if replace:
        plain = open_store(url, dict(options or {}))
        try:
            _vector_store(plain).set_vector_space(Index(embedder).space, True)
        finally:
            plain.close()
    return open_store(url, {**(options or {}), "embedder": embedder})


def reindex(
    store: Store,
    *,
    batch: int = BATCH,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ReindexStats:
    """Embed and store the missing vectors of every live session of ``store``,
    calling ``progress(sessions done, sessions)`` as it goes."""
    index = store.run(store.ops.claimed())
    if index is None:
        raise ConfigurationError("reindex needs a store opened with an embedder")
    backend = _vector_store(store)
    ids = store.sessions()
    texts = embedded = 0
    progress(0, len(ids))
    for done, sid in enumerate(ids, 1):
        docs = index.docs([(sid, store.backend.history(sid, None, now(), True))])
        unique = {d.key: d for d in docs}
        stored = backend.get_vectors(list(unique))
        missing = [doc.text() for key, doc in unique.items() if key not in stored]
        texts += len(unique)
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            backend.put_vectors(index.entries(part, index.embedder.embed(part)))
            embedded += len(part)
        progress(done, len(ids))
    return ReindexStats(len(ids), texts, embedded)


def _vector_store(store: Store) -> VectorStore:
    store.capabilities.require_vectors()
    return cast(VectorStore, store.backend)


__all__ = ["BATCH", "ReindexStats", "load_embedder", "open_for_reindex", "reindex"]
