"""The one driver of operations written without I/O.

Such an operation is a generator: it yields requests, receives the reply to each,
and returns its result. It decides everything and performs nothing, so the same
code runs under a sync and an async client, and tests can feed it replies. The
Redis backend's operations (:mod:`memvault.backends.redis_ops`) and the adapters'
plans (:mod:`memvault.integrations`) are written so; :func:`drive` and
:func:`drive_async` run them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")

Operation = Generator[Request, Any, Result]
"""Yields requests, is sent each one's reply, returns the result."""


def drive(operation: Operation[Request, Result], perform: Callable[[Request], Any]) -> Result:
    """Run ``operation``, performing each request with ``perform`` (its return value is
    the reply). An exception ``perform`` raises propagates, and closes the operation."""
    try:
        request = next(operation)
        while True:
            request = operation.send(perform(request))
    except StopIteration as done:
        result: Result = done.value
        return result
    finally:
        operation.close()


# The async twin of drive(): a loop cannot both await and not.
async def drive_async(operation: Operation[Request, Result],
                      perform: Callable[[Request], Awaitable[Any]]) -> Result:
    """:func:`drive` with an awaited ``perform``."""
    try:
        request = next(operation)
        while True:
            request = operation.send(await perform(request))
    except StopIteration as done:
        result: Result = done.value
        return result
    finally:
        operation.close()
