"""The async face of a sync backend: every call runs on a worker thread.

Used for the backends whose driver has no native async client (memory, SQLite, a
third party's sync backend): :func:`memvault.urls.open_async_backend` wraps the
backend a URL's scheme opens unless its module has ``open_async_backend``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from memvault.backends.base import PROTOCOL, SEARCHING, VECTOR_STORE, Backend, Capabilities

T = TypeVar("T")


class _Running:
    """Counts the calls running on worker threads; runs a function once none is."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._count = 0

    def run(self, function: Callable[..., T], *args: Any) -> T:
        with self._idle:
            self._count += 1
        try:
            return function(*args)
        finally:
            with self._idle:
                self._count -= 1
                self._idle.notify_all()

    def wait_then(self, function: Callable[[], T]) -> T:
        with self._idle:
            self._idle.wait_for(lambda: self._count == 0)
        return function()


class ThreadedAsyncBackend:
    """:class:`~memvault.backends.base.AsyncBackend` over a sync ``backend``: each of
    its methods, awaited, runs on a worker thread with the arguments it was given.

    It has the methods of the protocol and of its optional capabilities
    (:class:`~memvault.backends.base.Searching`,
    :class:`~memvault.backends.base.VectorStore`) that ``backend`` has, and only
    those; it states ``backend``'s :attr:`capabilities`, worked out once here.

    A call whose awaiter is cancelled runs on to its end on its thread (a thread
    cannot be interrupted); :meth:`close` waits for such calls before it closes the
    backend.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.capabilities = Capabilities.of(backend)
        self._calls = _Running()
        for name in (*PROTOCOL, *SEARCHING, *VECTOR_STORE):
            if name != "close" and hasattr(backend, name):
                setattr(self, name, self._forward(getattr(backend, name)))

    def __repr__(self) -> str:
        return f"ThreadedAsyncBackend({self.backend!r})"

    def _forward(self, function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
        """``function`` awaited: run on a worker thread, counted while it runs."""

        async def call(*args: Any) -> T:
            return await asyncio.to_thread(self._calls.run, function, *args)

        call.__name__ = call.__qualname__ = function.__name__
        return call

    async def close(self) -> None:
        """Close the backend once no call runs on a worker thread: a call whose awaiter
        was cancelled runs on to its end there (SQLite's connections closed under a
        running call crash)."""
        await asyncio.to_thread(self._calls.wait_then, self.backend.close)


__all__ = ["ThreadedAsyncBackend"]
