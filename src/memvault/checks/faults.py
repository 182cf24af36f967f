"""Fault injection: make a chosen backend operation fail, before or after it applies.

``when="before"``: the operation is not sent; the caller gets
:class:`~memvault.errors.BackendUnavailableError` (nothing was applied).
``when="after"``: the operation runs and commits, then the caller gets
:class:`~memvault.errors.OutcomeUnknownError` (as after a timeout once the
request was sent). Tests use it to prove that errors surface as documented and
that retrying the same messages stores them exactly once::

    faults = inject_faults(store)
    faults.fail("append", when="after")
    with pytest.raises(OutcomeUnknownError):
        store.session("s").append(batch)
    store.session("s").append(batch)          # the retry: stored once
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from memvault.errors import BackendUnavailableError, OutcomeUnknownError

When = Literal["before", "after"]
OPERATIONS = frozenset(
    {
        "append",
        "summarize",
        "history",
        "info",
        "pop",
        "trim",
        "snapshot",
        "snapshots",
        "rollback",
        "fork",
        "log",
        "delete",
        "sessions",
        "compact",
    }
)


@dataclass
class _Plan:
    when: When
    times: int
    error: Callable[[str], BaseException] | None


@dataclass
class FaultInjector:
    """Wraps a backend (sync or async); each call of a planned operation may fail.

    Attributes:
        backend: the real backend.
        injected: ``(operation, when)`` of every fault raised so far, in order.
    """

    backend: Any
    injected: list[tuple[str, When]] = field(default_factory=list)
    _plans: dict[str, list[_Plan]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(
        self,
        operation: str,
        *,
        when: When = "before",
        times: int = 1,
        error: Callable[[str], BaseException] | None = None,
    ) -> FaultInjector:
        """Plan the next ``times`` calls of ``operation`` to fail.

        Args:
            operation: a backend method (``append``, ``pop``, ``rollback``, …).
            when: ``"before"`` it is sent, or ``"after"`` it committed.
            times: how many consecutive calls fail.
            error: makes the exception from a message (default: the documented one).
        """
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {sorted(OPERATIONS)}")
        if when not in ("before", "after") or times < 1:
            raise ValueError("when is 'before' or 'after'; times >= 1")
        with self._lock:
            self._plans.setdefault(operation, []).append(_Plan(when, times, error))
        return self

    def clear(self) -> None:
        """Cancel every planned fault not yet raised."""
        with self._lock:
            self._plans.clear()

    def _next(self, operation: str) -> _Plan | None:
        with self._lock:
            plans = self._plans.get(operation)
            if not plans:
                return None
            plan = plans[0]
            plan.times -= 1
            if plan.times == 0:
                plans.pop(0)
            self.injected.append((operation, plan.when))
            return plan

    @staticmethod
    def _error(operation: str, plan: _Plan) -> BaseException:
        if plan.error is not None:
            return plan.error(f"injected fault: {operation} ({plan.when})")
        if plan.when == "before":
            return BackendUnavailableError(f"injected fault: {operation} was not sent")
        return OutcomeUnknownError(f"injected fault: {operation} committed, reply lost")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "backend":  # not yet set (copy, unpickle)
            raise AttributeError(name)
        method = getattr(self.backend, name)
        if name not in OPERATIONS:
            return method
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def acall(*args: Any) -> Any:
                plan = self._next(name)
                if plan is not None and plan.when == "before":
                    raise self._error(name, plan)
                result = await method(*args)
                if plan is not None:
                    raise self._error(name, plan)
                return result

            return acall

        @functools.wraps(method)
        def call(*args: Any) -> Any:
            plan = self._next(name)
            if plan is not None and plan.when == "before":
                raise self._error(name, plan)
            result = method(*args)
            if plan is not None:
                raise self._error(name, plan)
            return result

        return call


def inject_faults(store: Any) -> FaultInjector:
    """Route ``store``'s backend calls through a new :class:`FaultInjector`.

    Works on a :class:`memvault.Store`, an :class:`~memvault.AsyncStore`, or the
    contract's blocking proxy of one. Every call made after this one goes through
    the injector, through session handles made before it too.
    """
    target = getattr(store, "target", store)  # the contract's Blocking proxy
    if isinstance(target.backend, FaultInjector):
        return target.backend
    injector = FaultInjector(target.backend)
    target.backend = injector
    return injector


__all__ = ["FaultInjector", "inject_faults"]
