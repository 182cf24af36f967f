"""The async face of a sync backend (ThreadedAsyncBackend) closes it only after the
calls still running on worker threads, those whose awaiter was cancelled included."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from memvault.backends.threaded import ThreadedAsyncBackend


class Blocking:
    """A backend whose history() waits for ``release``; it records what happened."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.events: list[str] = []

    def history(self, *args: Any) -> list[Any]:
        self.entered.set()
        self.release.wait(10)
        self.events.append("history returned")
        return []

    def close(self) -> None:
        self.events.append("closed")


async def test_close_waits_for_a_cancelled_call_still_on_its_thread() -> None:
    """A history() cancelled while it runs on its thread goes on running there;
    close() closes the backend only once it has returned. Failing: the SQLite
    backend's connections were closed under a running call (the async contract's
    cancellation test crashed the process with a segfault at teardown)."""
    backend = Blocking()
    threaded = ThreadedAsyncBackend(backend)  # type: ignore[arg-type]
    call = asyncio.ensure_future(threaded.history("s", None, 0.0))
    assert await asyncio.to_thread(backend.entered.wait, 10)
    call.cancel()
    closing = asyncio.ensure_future(threaded.close())
    await asyncio.sleep(0.05)
    assert not closing.done() and backend.events == []
    backend.release.set()
    await asyncio.wait_for(closing, 10)
    assert backend.events == ["history returned", "closed"]
    assert call.cancelled()
