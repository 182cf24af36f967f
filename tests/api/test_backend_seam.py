"""The outer backend seam, from a backend author's side: a sync backend with exactly
the protocol's methods (no search index, no vector store) works through both faces,
and what it lacks is refused with an error that says so."""

from __future__ import annotations

import types
from typing import Any

import pytest

from memvault.aio import open_async_store
from memvault.backends.base import PROTOCOL, SEARCHING, VECTOR_STORE, Capabilities
from memvault.backends.memory import MemoryBackend
from memvault.backends.threaded import ThreadedAsyncBackend
from memvault.errors import ConfigurationError
from memvault.messages import Message
from memvault.store import open_store


class Minimal:
    """A sync backend with the protocol's methods and nothing else (each one the
    memory backend's)."""

    def __init__(self) -> None:
        self._inner = MemoryBackend()


def _forward(name: str) -> Any:
    def method(self: Minimal, *args: Any) -> Any:
        return getattr(self._inner, name)(*args)

    method.__name__ = name
    return method


for _name in PROTOCOL:
    setattr(Minimal, _name, _forward(_name))

MODULE = types.SimpleNamespace(open_backend=lambda url, **options: Minimal())


def test_the_minimal_backend_has_the_protocol_and_nothing_more() -> None:
    public = {n for n in dir(Minimal) if not n.startswith("_")}
    assert public == set(PROTOCOL)


def test_a_backend_with_only_the_protocol_serves_the_sync_face() -> None:
    store = open_store("minimal://", {}, MODULE)
    try:
        s = store.session("s")
        s.append([Message.user("apple pie"), Message.user("kiwi")])
        s.pop()
        assert [h.message.content for h in store.search("apple")] == ["apple pie"]
        assert store.compact(keep_events=0).nodes == 1
        with pytest.raises(ConfigurationError, match="no search index"):
            store.search("apple", include_hidden=True)
    finally:
        store.close()
    with pytest.raises(ConfigurationError, match="stores no vectors"):
        open_store("minimal://", {"embedder": lambda texts: [[1.0] for _ in texts]}, MODULE)


async def test_a_backend_with_only_the_protocol_serves_the_async_face() -> None:
    """The async face runs it on worker threads; its compact() once raised
    AttributeError ('vector_keys'): the thread wrapper defined the vector store's
    methods whatever the backend had."""
    store = open_async_store("minimal://", {}, MODULE)
    try:
        s = store.session("s")
        await s.append([Message.user("apple pie"), Message.user("kiwi")])
        await s.pop()
        assert [h.message.content for h in await store.search("apple")] == ["apple pie"]
        assert (await store.compact(keep_events=0)).nodes == 1
        with pytest.raises(ConfigurationError, match="no search index"):
            await store.search("apple", include_hidden=True)
    finally:
        await store.close()
    embedding = open_async_store(
        "minimal://", {"embedder": lambda texts: [[1.0] for _ in texts]}, MODULE
    )
    try:
        with pytest.raises(ConfigurationError, match="stores no vectors"):
            await embedding.session("s").append([Message.user("x")])
    finally:
        await embedding.close()


def test_the_thread_wrapper_has_the_methods_the_backend_has() -> None:
    """ThreadedAsyncBackend forwards a capability's methods only when the wrapped
    backend has them, so the facade sees the same capabilities on both faces."""
    minimal, full = ThreadedAsyncBackend(Minimal()), ThreadedAsyncBackend(MemoryBackend())
    for name in PROTOCOL:
        assert hasattr(minimal, name) and hasattr(full, name)
    for name in (*SEARCHING, *VECTOR_STORE):
        assert not hasattr(minimal, name) and hasattr(full, name)
    assert Capabilities.of(minimal) == Capabilities("Minimal")
    assert Capabilities.of(full) == Capabilities("MemoryBackend", search=True, vectors=True)


class HalfVectors(Minimal):
    """A vector store half written: two of its seven methods."""

    def vector_space(self) -> str | None:
        return None

    def get_vectors(self, keys: Any) -> dict[str, bytes]:
        return {}


def test_a_half_written_vector_store_is_named_as_such() -> None:
    module = types.SimpleNamespace(open_backend=lambda url, **options: HalfVectors())
    with pytest.raises(ConfigurationError) as caught:
        open_store("half://", {"embedder": lambda texts: [[1.0] for _ in texts]}, module)
    assert "HalfVectors stores no vectors (it lacks set_vector_space, put_vectors" in str(
        caught.value
    )
