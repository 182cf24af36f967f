"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) on every backend.

Every capability must be detected and every one of its tests pass: base ones
(put, put_writes, get_tuple, list, delete_thread) and the extended ones
(copy_thread, prune, delete_for_runs), 81 tests in conformance 0.0.2.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

import memvault
from memvault.integrations.langgraph import MemvaultSaver


async def test_every_capability_is_detected_and_passes(any_store_url: str) -> None:
    @checkpointer_test(name="MemvaultSaver")
    async def saver() -> AsyncIterator[MemvaultSaver]:
        async with memvault.open_async(any_store_url) as store:
            yield MemvaultSaver(async_store=store)

    report = await validate(saver)

    failures = {cap: r.failures for cap, r in report.results.items() if not r.passed}
    assert failures == {}
    assert {cap for cap, r in report.results.items() if r.detected} == {
        c.value for c in ALL_CAPABILITIES
    }
    assert sum(r.tests_passed for r in report.results.values()) == 81
