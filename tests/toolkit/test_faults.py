"""Fault injection on the native async face and on every backend; the plugin's import
cost."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memvault
from memvault import BackendUnavailableError, Message, OutcomeUnknownError
from memvault.testing import inject_faults


async def test_async_store_retry_after_unknown_outcome_stores_once(any_store_url: str) -> None:
    async with memvault.open_async(any_store_url) as store:
        faults = inject_faults(store)
        s = store.session("s")
        batch = [Message.user("q"), Message.assistant("a")]
        faults.fail("append", when="after")
        with pytest.raises(OutcomeUnknownError):
            await s.append(batch)
        assert await s.append(batch) == 1
        assert await s.history() == batch
        faults.fail("history", when="before")
        with pytest.raises(BackendUnavailableError):
            await s.history()
        assert len(await s.log()) == 1


def test_sync_retry_after_unknown_outcome_on_every_backend(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        faults = inject_faults(store)
        assert inject_faults(store) is faults  # wrapping twice reuses the injector
        s = store.session("s")
        batch = [Message.user(str(i)) for i in range(3)]
        faults.fail("append", when="after", times=3)
        for _ in range(3):
            with pytest.raises(OutcomeUnknownError):
                s.append(batch)
        assert s.append(batch) == 1 and s.history() == batch


def test_planned_faults_are_checked_and_can_be_cancelled() -> None:
    with memvault.open("memory://") as store:
        faults = inject_faults(store)
        with pytest.raises(ValueError, match="unknown operation"):
            faults.fail("apend")
        with pytest.raises(ValueError):
            faults.fail("append", when="during")  # type: ignore[arg-type]
        faults.fail("append", error=lambda text: TimeoutError(text))
        with pytest.raises(TimeoutError, match="injected fault: append"):
            store.session("s").append([Message.user("x")])
        faults.fail("append")
        faults.clear()
        assert store.session("s").append([Message.user("x")]) == 1


def test_plugin_import_is_light() -> None:
    """A project that installs memvault but never uses the toolkit pays only for pytest
    (and memvault's core) when pytest loads the plugin."""
    heavy = [
        "hypothesis",
        "syrupy",
        "memvault.testing.contract",
        "memvault.testing.guard",
        "memvault.checks.lostwrites",
        "memvault.testing.state",
        "memvault.cli.transfer",
    ]
    code = f"import sys, memvault.testing.plugin; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
