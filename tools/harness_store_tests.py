"""Run pydantic-ai-harness's own tests for its stores against memvault's stores.

A pytest plugin, for a checkout of the harness's tests (its sdist ships none; a git
checkout of ``pydantic/pydantic-ai-harness`` whose store code matches the installed
harness), never copied into this repository. From the checkout's root, with
memvault installed (``pip install -e ".[dev]"`` here, plus the harness's test
dependencies ``dirty-equals`` and ``inline-snapshot``)::

    PYTHONPATH=/path/to/memvault/tools python -m pytest -p no:asyncio -p no:memvault \\
        -p harness_store_tests tests/memory/test_stores.py -k "local_store or bundled_stores"
    MEMVAULT_HARNESS_STEPS=1 PYTHONPATH=/path/to/memvault/tools python -m pytest \\
        -p no:asyncio -p no:memvault -p harness_store_tests \\
        tests/step_persistence/test_step_persistence.py

- ``tests/memory/test_stores.py``: its contract tests build their stores with
  ``_local_stores(tmp_path)`` (three stores, picked by index); this plugin swaps in
  three ``MemvaultMemoryStore``s, on ``memory://``, SQLite and Redis
  (``$MEMVAULT_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/2``; each test has
  a namespace of its own, nothing is flushed).
- ``tests/step_persistence/test_step_persistence.py`` (with
  ``MEMVAULT_HARNESS_STEPS=1``): every ``InMemoryStepStore()`` of the module builds a
  ``MemvaultStepStore`` instead, on ``$MEMVAULT_HARNESS_STEP_URL`` (default
  ``memory://``; ``{tmp}`` in it is ``$MEMVAULT_HARNESS_TMP``). Compare with a run
  without the variable: the tests that fail on the harness's own store fail on
  memvault's too, and three more check that ``from_spec`` built an
  ``InMemoryStepStore``.

The stores a test opened are closed on its own event loop before it ends (an async
Redis client closed on another loop leaves its socket behind).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Generator
from typing import Any

import pytest

import memvault
from memvault.integrations.pydantic_ai_harness import MemvaultMemoryStore, MemvaultStepStore

REDIS = os.environ.get("MEMVAULT_TEST_REDIS_URL", "redis://127.0.0.1:6379/2")
STEP_URL = os.environ.get("MEMVAULT_HARNESS_STEP_URL", "memory://")
_opened: list[memvault.AsyncStore] = []


def _open(url: str) -> memvault.AsyncStore:
    store = memvault.open_async(url)
    _opened.append(store)
    return store


def memvault_memory_stores(tmp_path: Any) -> list[MemvaultMemoryStore]:
    namespace = "harness-" + uuid.uuid4().hex[:12]
    urls = ["memory://", f"sqlite:///{tmp_path}/memvault.db", REDIS]
    return [MemvaultMemoryStore(_open(url), namespace=namespace) for url in urls]


def memvault_step_store(**options: Any) -> MemvaultStepStore:
    if options:
        raise NotImplementedError(f"MemvaultStepStore takes no {sorted(options)}")
    url = STEP_URL.replace("{tmp}", os.environ.get("MEMVAULT_HARNESS_TMP", "/tmp"))
    return MemvaultStepStore(_open(url), namespace="steps-" + uuid.uuid4().hex[:12])


@pytest.fixture(autouse=True)
def _memvault_instead(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Generator[None, None, None]:
    name = request.module.__name__
    if name.endswith("memory.test_stores"):
        monkeypatch.setattr(request.module, "_local_stores", memvault_memory_stores)
    if name.endswith("step_persistence.test_step_persistence") and (
        os.environ.get("MEMVAULT_HARNESS_STEPS") == "1"
    ):
        monkeypatch.setattr(request.module, "InMemoryStepStore", memvault_step_store)
    yield
    _opened.clear()  # closed by the test's own event loop: see pytest_pyfunc_call


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
    test = pyfuncitem.obj
    if asyncio.iscoroutinefunction(test):

        async def closing(*args: Any, **kwargs: Any) -> Any:
            try:
                return await test(*args, **kwargs)
            finally:
                while _opened:
                    await _opened.pop().close()

        pyfuncitem.obj = closing
    return (yield)
