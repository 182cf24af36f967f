"""The three adapters are built the same ways: from open stores, or from a URL.

``store=`` (sync) / ``async_store=`` (async) take open stores, left open;
``from_conn_string(...)`` opens a store from a URL and closes it on leaving
(``with``: sync, ``async with``: async).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

import memvault
from memvault import BackendUnavailableError, ConfigurationError
from memvault.integrations.langchain import MemvaultChatMessageHistory
from memvault.integrations.langgraph import MemvaultSaver
from memvault.integrations.openai_agents import MemvaultSession

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def stored(url: str) -> dict[str, int]:
    """Each session's visible length, read with memvault's own API."""
    with memvault.open(url) as store:
        return {s: store.session(s).info().length for s in store.sessions()}


def test_every_adapter_builds_from_a_url_with_and_closes_on_leaving(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    with MemvaultChatMessageHistory.from_conn_string("chat", url, writer="w") as history:
        history.add_messages([HumanMessage("hi", id="m1")])
        assert history.session.log()[-1].writer == "w"
    with pytest.raises(BackendUnavailableError, match="closed"):
        history.add_messages([HumanMessage("again")])
    with MemvaultSaver.from_conn_string(url) as saver:
        saver.put(CONFIG, empty_checkpoint(), {}, {})
    with pytest.raises(BackendUnavailableError, match="closed"):
        saver.put(CONFIG, empty_checkpoint(), {}, {})
    with (
        pytest.raises(ConfigurationError, match="async"),
        MemvaultSession.from_conn_string("agent", url),
    ):
        pass
    assert stored(url) == {"chat": 1, "langgraph:t1": 1}


def test_every_adapter_builds_from_a_url_with_async_with(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"

    async def main() -> None:
        async with MemvaultSession.from_conn_string(
            "agent", url, session_settings={"limit": 1}
        ) as session:
            await session.add_items(
                [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
            )
            assert await session.get_items() == [{"role": "user", "content": "b"}]
        with pytest.raises(BackendUnavailableError, match="closed"):
            await session.get_items()
        async with MemvaultChatMessageHistory.from_conn_string("chat", url) as history:
            await history.aadd_messages([HumanMessage("hi")])
            with pytest.raises(ConfigurationError, match="store="):
                history.add_messages([HumanMessage("sync face not opened")])
        with pytest.raises(BackendUnavailableError, match="closed"):
            await history.aget_messages()
        async with MemvaultSaver.from_conn_string(url) as saver:
            await saver.aput(CONFIG, empty_checkpoint(), {}, {})
        with pytest.raises(BackendUnavailableError, match="closed"):
            await saver.aget_tuple(CONFIG)

    asyncio.run(main())
    assert stored(url) == {"agent": 2, "chat": 1, "langgraph:t1": 1}


def test_every_adapter_takes_open_stores_under_the_same_keywords(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"

    async def main() -> None:
        async with memvault.open_async(url) as async_store:
            session = MemvaultSession("s", async_store=async_store)
            history = MemvaultChatMessageHistory("s", async_store=async_store)
            saver = MemvaultSaver(async_store=async_store)
            await session.add_items([{"role": "user", "content": "a"}])
            await history.aadd_messages([HumanMessage("b")])
            await saver.aput(CONFIG, empty_checkpoint(), {}, {})
            # The memvault session underneath: one attribute name on both sessions.
            assert session.async_session.id == history.async_session.id == "s"
            assert (await session.async_session.info()).length == 2
            await session.close()  # not its store: left open
            assert (await history.async_session.info()).length == 2
            with pytest.raises(ConfigurationError, match="not both"):
                MemvaultSession("s", async_store, async_store=async_store)

    asyncio.run(main())
    with memvault.open(url) as store:
        history = MemvaultChatMessageHistory("s", store=store)
        saver = MemvaultSaver(store=store)
        assert [m.content for m in history.messages] == ["a", "b"]
        assert saver.get_tuple(CONFIG) is not None
        assert saver.store is store  # a saver serves every thread: it holds the store
        for build in (
            lambda: MemvaultSession("s", async_store=store),  # type: ignore[arg-type]
            lambda: MemvaultChatMessageHistory("s", async_store=store),  # type: ignore[arg-type]
            lambda: MemvaultSaver(async_store=store),
        ):  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match=r"async_store= must be a memvault\."):
                build()
