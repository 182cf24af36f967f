"""The backends' ``chain`` primitive, on every backend and both faces: what
``history(at_version=N)`` and audits read (tests of the API: the contract suite's
VersionsContract)."""

from __future__ import annotations

import asyncio
import time

import memvault
from memvault import Message


def test_chain_reads_any_node_and_tells_a_missing_one(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        s = store.session("s")
        s.append([Message.user(f"m{i}") for i in range(4)])
        s.pop()
        popped = s.log()[-1].head_before  # hidden, still stored
        chain, now = store.backend.chain, time.time()
        assert [d for d, _ in chain("s", popped, 0, None, now)] == [1, 2, 3, 4]
        assert [d for d, _ in chain("s", popped, 1, 2, now)] == [3, 4]
        assert chain("s", popped, 9, None, now) == []
        assert chain("s", 0, 0, None, now) == []
        assert chain("other", popped, 0, None, now) == []
        assert chain("s", 10_000, 0, None, now) is None


def test_async_chain_tells_a_missing_node(any_store_url: str) -> None:
    async def run() -> None:
        async with memvault.open_async(any_store_url) as store:
            s = store.session("s")
            await s.append([Message.user("a"), Message.user("b")])
            head = (await s.log())[-1].head_after
            now = time.time()
            assert [d for d, _ in await store.backend.chain("s", head, 1, None, now)] == [2]
            assert await store.backend.chain("s", 10_000, 0, None, now) is None

    asyncio.run(run())
