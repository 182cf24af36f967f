"""Open a store, sync or async face, from a picklable description.

Contract tests are written once, against the sync API. For the async face, the
:class:`Blocking` proxy runs every awaited call on an event loop in a background
thread, so the same test drives the real async code path.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import memvault
from memvault.aio import AsyncSession, AsyncStore

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class Blocking:
    """A blocking view of an AsyncStore or AsyncSession (for tests written once)."""

    def __init__(self, target: Any, loop: _LoopThread) -> None:
        self._target = target
        self._loop = loop

    def __repr__(self) -> str:
        return f"Blocking({self._target!r})"

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

    def close(self) -> None:
        try:
            self._loop.run(self._target.close())
        finally:
            self._loop.stop()


@dataclass(frozen=True)
class Opener:
    """A picklable recipe for a store: worker processes use it to connect on their own.

    Attributes:
        url: the store URL.
        face: ``"sync"`` returns a :class:`memvault.Store`; ``"async"`` an
            :class:`~memvault.AsyncStore` behind a :class:`Blocking` proxy.
        options: keyword options for ``memvault.open`` / ``open_async``.
    """

    url: str
    face: Literal["sync", "async"] = "sync"
    options: dict[str, Any] = field(default_factory=dict)

    def __call__(self, **options: Any) -> Any:
        merged = {**self.options, **options}
        if self.face == "sync":
            return memvault.open(self.url, **merged)
        loop = _LoopThread()

        async def start() -> AsyncStore:
            return memvault.open_async(self.url, **merged)

        try:
            return Blocking(loop.run(start()), loop)
        except BaseException:
            loop.stop()
            raise
