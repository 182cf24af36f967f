"""The one driver of operations written without I/O.

Such an operation is a generator: it yields requests, receives the reply to each,
and returns its result. It decides everything and performs nothing, so the same
code runs under a sync and an async client, and tests can feed it replies. The
Redis backend's operations (:mod:`memvault.backends.redis.ops`) and the adapters'
plans (:mod:`memvault.integrations`) are written so; :func:`drive` and
:func:`drive_async` run them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")

Operation = Generator[Request, Any, Result]
"""Yields requests, is sent each one's reply, returns the result."""


@dataclass(frozen=True)
class Callback:
    """A request the driver performs itself: ``function(value)``, the caller's own code
    (compact's progress). :func:`drive_async` calls it on a worker thread, as the
    async face of a backend run on threads does, so it may wait for the event loop
    (call the async store from a sync callback) without deadlocking it."""

    function: Callable[[Any], None]
    value: Any


def drive(operation: Operation[Any, Result], perform: Callable[[Request], Any]) -> Result:
    """Run ``operation``, performing each request with ``perform`` (its return value is
    the reply), a :class:`Callback` by calling it. An exception ``perform`` or a
    callback raises propagates, and closes the operation."""
    try:
        request = next(operation)
        while True:
            if isinstance(request, Callback):
                request.function(request.value)
                request = operation.send(None)
            else:
                request = operation.send(perform(request))
    except StopIteration as done:
        result: Result = done.value
        return result
    finally:
        operation.close()


# The async twin of drive(): a loop cannot both await and not.
async def drive_async(
    operation: Operation[Any, Result], perform: Callable[[Request], Awaitable[Any]]
) -> Result:
    """:func:`drive` with an awaited ``perform``, and each :class:`Callback` on a
    worker thread."""
    try:
        request = next(operation)
        while True:
            if isinstance(request, Callback):
                await asyncio.to_thread(request.function, request.value)
                request = operation.send(None)
            else:
                request = operation.send(await perform(request))
    except StopIteration as done:
        result: Result = done.value
        return result
    finally:
        operation.close()
