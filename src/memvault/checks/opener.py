"""Open a store, sync or async face, from a picklable description.

Contract tests are written once, against the sync API. For the async face, the
:class:`Blocking` proxy runs every awaited call on an event loop in a background
thread, so the same test drives the real async code path.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal, TypeVar

from memvault.aio import AsyncSession, AsyncStore, open_async_store
from memvault.store import open_store
from memvault.urls import redact

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        if threading.current_thread() is self._thread:  # it would wait for itself
            raise RuntimeError("a blocking call on the event loop's own thread")

        async def wait() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wait(), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


# A thin holder with a repr, like Store and AsyncStore: alike in shape only.
class Blocking:
    """A blocking view of an AsyncStore or AsyncSession (for tests written once)."""

    def __init__(self, target: Any, loop: _LoopThread) -> None:
        self._target = target
        self._loop = loop

    def __repr__(self) -> str:
        return f"Blocking({self._target!r})"

    @property
    def target(self) -> Any:
        """The wrapped AsyncStore or AsyncSession."""
        return self._target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if inspect.iscoroutine(result):
                result = self._loop.run(result)
            if isinstance(result, (AsyncSession, AsyncStore)):
                return Blocking(result, self._loop)
            return result

        return call

    def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` on the proxy's loop (a call on the wrapped object's
        parts, such as its backend)."""
        return self._loop.run(awaitable)

    def close(self) -> None:
        try:
            self._loop.run(self._target.close())
        finally:
            self._loop.stop()


BackendFactory = Callable[..., Any]
"""Makes a backend (the :class:`~memvault.backends.base.Backend` protocol) from the
backend's own keyword options. Must be picklable (a module-level function or class, or
a :func:`functools.partial` of one) so worker processes can open their own."""


def _ignoring_url(factory: BackendFactory) -> Callable[..., Any]:
    """``factory`` as a scheme's ``open_backend(url, **options)``: the URL is a label."""
    return lambda url, **options: factory(**options)


@dataclass(frozen=True)
class Opener:
    """A picklable recipe for a store: worker processes use it to connect on their own.

    Attributes:
        url: the store URL; with ``factory``, only a label shown in ``repr`` and reports.
        face: ``"sync"`` returns a :class:`memvault.Store`; ``"async"`` an
            :class:`~memvault.AsyncStore` behind a :class:`Blocking` proxy.
        options: keyword options for ``memvault.open`` / ``open_async``.
        factory: for a backend no URL scheme reaches (a third party's): called with
            the backend's own options, it returns a sync backend. The async face runs
            it on worker threads unless ``async_factory`` is given.
        async_factory: like ``factory``, returning a native async backend.
    """

    url: str
    face: Literal["sync", "async"] = "sync"
    options: dict[str, Any] = field(default_factory=dict)
    factory: BackendFactory | None = None
    async_factory: BackendFactory | None = None

    def __repr__(self) -> str:  # shown in test ids and failures: never the password
        return f"Opener({redact(self.url)!r}, face={self.face!r})"

    def _open(self, merged: dict[str, Any]) -> Any:
        """The sync store, or the native AsyncStore (for the async face)."""
        module = None  # the backend the URL's scheme names
        if self.factory is not None or self.async_factory is not None:
            assert self.face == "async" or self.factory is not None, "a sync face needs `factory`"
            # The factories, shaped as a URL scheme's module is.
            module = SimpleNamespace(
                **{
                    name: _ignoring_url(make)
                    for name, make in (
                        ("open_backend", self.factory),
                        ("open_async_backend", self.async_factory),
                    )
                    if make is not None
                }
            )
        if self.face == "sync":
            return open_store(self.url, merged, module)
        return open_async_store(self.url, merged, module)

    def __call__(self, **options: Any) -> Any:
        """Open a new handle on the store; ``options`` override the recipe's."""
        merged = {**self.options, **options}
        if self.face == "sync":
            return self._open(merged)
        loop = _LoopThread()

        async def start() -> AsyncStore:
            store: AsyncStore = self._open(merged)
            return store

        try:
            return Blocking(loop.run(start()), loop)
        except BaseException:
            loop.stop()
            raise
