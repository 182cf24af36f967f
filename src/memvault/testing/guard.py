"""The contract guard: a backend's test class must run the whole contract.

For every collected subclass of a contract part, the plugin adds one test item
(unless the command line picks single tests by node id),
``contract_guard``, that fails when a contract test was deleted, overridden
without ``@pytest.mark.xfail(reason=...)``, or not collected, or when the class
declares a capability the suite does not know (a typo would skip a part
silently). A backend that cannot pass a test says so, with a reason, in the open.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import pytest

from memvault.testing.contract.base import ALL_CAPABILITIES

GUARD_NAME = "contract_guard"
_CONTRACT_MODULES = "memvault.testing."


def _is_contract(cls: type) -> bool:
    # By name, not identity: a re-imported contract module must still count.
    return any(
        k.__name__ == "ContractBase" and k.__module__ == "memvault.testing.contract.base"
        for k in cls.__mro__
    )


def is_contract_subclass(cls: object) -> bool:
    """True for a user's (or our tests') class built on a contract part."""
    return (
        inspect.isclass(cls)
        and _is_contract(cls)
        and not cls.__module__.startswith(_CONTRACT_MODULES)
    )


def contract_tests(cls: type) -> dict[str, Any]:
    """The contract's own tests for ``cls``: name -> the function the contract defines."""
    tests: dict[str, Any] = {}
    for part in reversed(cls.__mro__):  # the most derived contract part wins, as in Python
        if part.__module__.startswith(_CONTRACT_MODULES) and _is_contract(part):
            for name, value in vars(part).items():
                if name.startswith("test") and callable(value):
                    tests[name] = value
    return tests


def xfail_reason(func: object) -> str | None:
    """The reason of an ``xfail`` mark on ``func``, if it has one with a non-empty reason."""
    for mark in getattr(func, "pytestmark", []):
        if getattr(mark, "name", None) == "xfail":
            reason = mark.kwargs.get("reason")
            if isinstance(reason, str) and reason.strip():
                return reason
    return None


def violations(cls: type, collected: Iterable[str]) -> list[str]:
    """What is wrong with ``cls`` as a certification of the whole contract."""
    seen = set(collected)
    problems = [
        f"capabilities: {name!r} is not one of {sorted(ALL_CAPABILITIES)}"
        for name in sorted(set(getattr(cls, "capabilities", ())) - ALL_CAPABILITIES)
    ]
    for name, func in sorted(contract_tests(cls).items()):
        own = getattr(cls, name, None)
        if own is not func:
            if xfail_reason(own) is not None:
                continue
            how = "overridden" if callable(own) else f"deleted (set to {own!r})"
            problems.append(f"{name}: {how} without @pytest.mark.xfail(reason=...)")
        elif name not in seen:
            problems.append(f"{name}: not collected")
    return problems


class ContractGuardError(AssertionError):
    """A contract test is missing or silently replaced."""


class ContractGuard(pytest.Item):
    """The guard item the plugin adds to each contract subclass."""

    def __init__(self, *, problems: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems

    def runtest(self) -> None:
        if self.problems:
            owner = self.parent.name if self.parent else "?"
            raise ContractGuardError(
                f"{owner} does not run the whole memvault contract:\n  "
                + "\n  ".join(self.problems)
                + "\nA test the backend cannot pass must stay, marked "
                "@pytest.mark.xfail(reason='why')."
            )

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ContractGuardError):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.parent.name if self.parent else ''}::{GUARD_NAME}"


def add_guards(items: list[pytest.Item]) -> None:
    """Insert a guard after the last collected test of each contract subclass."""
    groups: dict[pytest.Collector, list[int]] = {}
    for index, item in enumerate(items):
        cls = getattr(item, "cls", None)
        if item.parent is not None and is_contract_subclass(cls):
            groups.setdefault(item.parent, []).append(index)
    for parent, indexes in sorted(groups.items(), key=lambda g: -g[1][-1]):
        names = {getattr(items[i], "originalname", items[i].name) for i in indexes}
        guard = ContractGuard.from_parent(
            parent,
            name=GUARD_NAME,
            problems=violations(parent.obj, names),  # type: ignore[attr-defined]
        )
        items.insert(indexes[-1] + 1, guard)


__all__ = ["ContractGuard", "add_guards", "contract_tests", "violations", "xfail_reason"]
