"""Embedders: what turns text into the vectors semantic search ranks by.

An :class:`Embedder` has a ``name`` (recorded with the vectors it makes, so a
store is never ranked with another model's vectors), ``dims`` and ``embed(texts)``
returning one vector per text; an async twin ``aembed`` is optional (without it,
``embed`` runs on a worker thread). :func:`as_embedder` adapts what users have:

- ``"wordllama"``: the built-in local embedder (:class:`WordLlamaEmbedder`, extra
  ``memvault[recall]``), 256 dimensions, offline: its model ships in the wheel;
- any object with ``embed`` and ``dims`` (an :class:`Embedder`), used as is;
- a sentence-transformers model (``encode`` and
  ``get_sentence_embedding_dimension``), a fastembed model (``embed`` yielding
  arrays, ``model_name``), an OpenAI client (``embeddings.create``, with
  ``model=``), or any callable ``texts -> vectors`` (``dims`` probed by one call if
  not given). None of these libraries is imported by memvault.

Vectors are compared by cosine similarity: memvault normalizes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from memvault.errors import ConfigurationError, InvalidArgumentError

Vectors = Sequence[Sequence[float]]


@runtime_checkable
class Embedder(Protocol):
    """Text to vectors: ``embed(texts)`` returns ``len(texts)`` vectors of ``dims``
    floats. ``name`` identifies the model (a store's vectors are tied to it)."""

    name: str
    dims: int

    def embed(self, texts: list[str]) -> Any: ...


async def aembed(embedder: Embedder, texts: list[str]) -> Any:
    """``embedder.aembed(texts)`` if it has one, else ``embed`` on a worker thread."""
    native = getattr(embedder, "aembed", None)
    if native is not None:
        return await native(texts)
    return await asyncio.to_thread(embedder.embed, texts)


class CallableEmbedder:
    """An :class:`Embedder` around a function ``texts -> vectors``."""

    def __init__(self, fn: Callable[[list[str]], Any], dims: int, name: str) -> None:
        self._fn, self.dims, self.name = fn, dims, name

    def embed(self, texts: list[str]) -> Any:
        return self._fn(texts)

    def __repr__(self) -> str:
        return f"CallableEmbedder({self.name!r}, dims={self.dims})"


class WordLlamaEmbedder:
    """The built-in embedder: WordLlama's ``l2_supercat`` model, 256 dimensions,
    loaded from the files inside the ``wordllama`` wheel (never downloaded)."""

    name = "wordllama:l2_supercat:256"
    dims = 256

    def __init__(self) -> None:
        try:
            import wordllama  # type: ignore[import-untyped]
        except ImportError as exc:
            raise ConfigurationError(
                "the built-in embedder needs wordllama: pip install 'memvault[recall]'"
            ) from exc
        from pathlib import Path

        # wordllama 0.4 looks for its tokenizer under the wrong folder name of the
        # package and would download it; as a cache folder, the package has it.
        self._model = wordllama.WordLlama.load(
            cache_dir=Path(wordllama.__file__).parent, disable_download=True
        )

    def embed(self, texts: list[str]) -> Any:
        return self._model.embed(texts)

    def __repr__(self) -> str:
        return "WordLlamaEmbedder()"


def as_embedder(
    obj: object, *, dims: int | None = None, name: str | None = None, model: str | None = None
) -> Embedder:
    """An :class:`Embedder` for ``obj`` (see the module's list), or ConfigurationError."""
    if obj == "wordllama":
        return WordLlamaEmbedder()
    if isinstance(obj, Embedder) and isinstance(getattr(obj, "dims", None), int):
        return obj
    fn, label = _function_of(obj, model)
    if fn is None:
        raise ConfigurationError(
            f"embedder must be 'wordllama', an Embedder (name, dims, embed) or a callable "
            f"texts -> vectors, not {type(obj).__name__}"
        )
    label = name or label
    if dims is None:
        dims = getattr(obj, "dims", None) or _probe(fn)
    if not isinstance(dims, int) or dims < 1:
        raise ConfigurationError(f"embedder dims must be a positive int, not {dims!r}")
    return CallableEmbedder(fn, dims, f"{label}:{dims}")


def _function_of(obj: Any, model: str | None) -> tuple[Callable[[list[str]], Any] | None, str]:
    """The ``texts -> vectors`` function of a known kind of model, and its name."""
    kind = type(obj).__name__
    if hasattr(obj, "get_sentence_embedding_dimension") and hasattr(obj, "encode"):
        return (lambda texts: obj.encode(texts)), f"sentence-transformers:{kind}"
    embeddings = getattr(obj, "embeddings", None)
    if embeddings is not None and hasattr(embeddings, "create"):
        if not model:
            raise ConfigurationError(
                "an OpenAI client needs model=, e.g. "
                "as_embedder(client, model='text-embedding-3-small')"
            )

        def openai(texts: list[str]) -> Any:
            answer = embeddings.create(model=model, input=texts)
            return [item.embedding for item in answer.data]

        return openai, f"openai:{model}"
    if hasattr(obj, "embed") and hasattr(obj, "model_name"):  # fastembed
        return (lambda texts: list(obj.embed(texts))), f"fastembed:{obj.model_name}"
    if callable(obj):
        return obj, getattr(obj, "__qualname__", kind)
    return None, kind


def _probe(fn: Callable[[list[str]], Any]) -> int:
    vectors = fn(["dims probe"])
    try:
        return len(vectors[0])
    except (TypeError, IndexError) as exc:
        raise InvalidArgumentError(
            f"the embedder returned {vectors!r} for one text, not a list of vectors"
        ) from exc


__all__ = ["CallableEmbedder", "Embedder", "WordLlamaEmbedder", "aembed", "as_embedder"]
