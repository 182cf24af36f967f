"""MemvaultSaver under real LangGraph graphs, on every backend, sync and async.

Each scenario runs twice: on LangGraph's own InMemorySaver (the oracle) and on
MemvaultSaver; what the graph says and does at every step must be the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import memvault
from memvault.integrations.langgraph import MemvaultSaver
from tests.support.langgraph_graphs import agent_graph, shape

Call = Callable[..., Awaitable[Any]]


def sync_calls(graph: Any) -> Call:
    async def call(name: str, *args: Any) -> Any:
        result = getattr(graph, name)(*args)
        return list(result) if name == "get_state_history" else result

    return call


def async_calls(graph: Any) -> Call:
    async def call(name: str, *args: Any) -> Any:
        if name == "get_state_history":
            return [s async for s in graph.aget_state_history(*args)]
        return await getattr(graph, "a" + name)(*args)

    return call


async def scenario(call: Call) -> list[Any]:
    """Turns, an interrupt and its resume, time travel and a fork; what was seen."""
    cfg = {"configurable": {"thread_id": "t-1"}}
    seen: list[Any] = []

    async def look() -> Any:
        state = await call("get_state", cfg)
        seen.append(
            (
                shape(state.values.get("messages", [])),
                state.next,
                [i.value for t in state.tasks for i in t.interrupts],
            )
        )
        return state

    out = await call("invoke", {"messages": [HumanMessage("weather in Paris?")]}, cfg)
    seen.append([i.value for i in out.get("__interrupt__", [])])
    await look()
    await call("invoke", Command(resume="approved"), cfg)
    await look()
    await call("invoke", {"messages": [HumanMessage("thanks")]}, cfg)
    await look()
    history = await call("get_state_history", cfg)
    seen.append(
        [(shape(s.values.get("messages", [])), s.next, s.metadata["step"]) for s in history]
    )
    # Time travel: back to the end of the first turn, then a fork from there.
    first_turn = next(s for s in history if s.next == () and len(s.values["messages"]) == 4)
    fork = await call(
        "update_state", first_turn.config, {"messages": [HumanMessage("and in Rome?")]}, "tools"
    )
    await call("invoke", None, fork)
    await look()
    seen.append(len(await call("get_state_history", cfg)))
    replay = await call("invoke", None, first_turn.config)
    seen.append(shape(replay["messages"]))
    return seen


@pytest.fixture
def oracle_sync() -> list[Any]:
    import asyncio

    return asyncio.run(scenario(sync_calls(agent_graph(InMemorySaver()))))


def test_sync_graph_behaves_as_on_langgraph_in_memory_saver(
    any_store_url: str, oracle_sync: list[Any]
) -> None:
    import asyncio

    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        seen = asyncio.run(scenario(sync_calls(agent_graph(saver))))
        assert saver.store is not None
        thread = saver.store.session("langgraph:t-1")
        stored = thread.history()
        writers = {e.writer for e in thread.log()}
    assert seen == oracle_sync
    assert seen[0] == ["look up the weather in Paris?"]
    assert seen[-1][-1] == ("ai", "answer 1", [])
    assert any(m.content.startswith("checkpoint ") for m in stored)
    assert len(writers) == 1 and "" not in writers


async def test_async_graph_behaves_as_on_langgraph_in_memory_saver(any_store_url: str) -> None:
    oracle = await scenario(async_calls(agent_graph(InMemorySaver())))
    async with MemvaultSaver.from_conn_string(any_store_url) as saver:
        seen = await scenario(async_calls(agent_graph(saver)))
        assert saver.async_store is not None
        assert "langgraph:t-1" in await saver.async_store.sessions()
    assert seen == oracle


class FernetCipher:
    """A real cipher for LangGraph's EncryptedSerializer (cryptography's Fernet)."""

    def __init__(self) -> None:
        from cryptography.fernet import Fernet

        self.fernet = Fernet(Fernet.generate_key())

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "fernet", self.fernet.encrypt(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "fernet"
        return self.fernet.decrypt(ciphertext)


def test_an_encrypted_serializer_round_trips_and_nothing_is_stored_in_clear(
    any_store_url: str,
) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    serde = EncryptedSerializer(FernetCipher())
    with MemvaultSaver.from_conn_string(any_store_url, serde=serde) as saver:
        graph = agent_graph(saver)
        cfg = {"configurable": {"thread_id": "secret"}}
        graph.invoke({"messages": [HumanMessage("my password is hunter2")]}, cfg)
        graph.invoke(Command(resume="approved"), cfg)
        messages = graph.get_state(cfg).values["messages"]
        assert saver.store is not None
        stored = saver.store.session("langgraph:secret").history()
    assert shape(messages)[0] == ("human", "my password is hunter2", [])
    assert shape(messages)[-1] == ("ai", "answer 1", [])
    dump = "".join(m.model_dump_json() for m in stored)
    assert "hunter2" not in dump and "aHVudGVyM" not in dump  # nor its base64


def test_a_growing_messages_channel_stores_only_the_new_messages(tmp_path: Any) -> None:
    from tests.support.langgraph_graphs import echo_graph

    with MemvaultSaver.from_conn_string(f"sqlite:///{tmp_path}/t.db") as saver:
        graph = echo_graph(saver)
        cfg = {"configurable": {"thread_id": "long"}}
        for n in range(6):
            graph.invoke({"messages": [HumanMessage(f"turn {n}")]}, cfg)
        latest = saver.get_tuple(cfg)
        assert saver.store is not None
        nodes = [m.metadata["langgraph"] for m in saver.store.session("langgraph:long").history()]
    assert latest is not None
    assert shape(latest.checkpoint["channel_values"]["messages"]) == [
        (kind, f"{prefix}turn {n}", [])
        for n in range(6)
        for kind, prefix in (("human", ""), ("ai", "echo: "))
    ]
    values = [
        n["values"]["messages"]
        for n in nodes  # type: ignore[index,call-overload]
        if n["kind"] == "checkpoint" and "messages" in n["values"]
    ]  # type: ignore[index,operator]
    assert sum("t" in v and "ext" not in v for v in values) == 1  # whole once, then suffixes
    assert sum("ext" in v for v in values) == 11


def test_the_store_ttl_applies_to_the_thread(any_store_url: str) -> None:
    with MemvaultSaver.from_conn_string(any_store_url, ttl=3600) as saver:
        agent_graph(saver).invoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "ttl"}}
        )
        assert saver.store is not None
        info = saver.store.session("langgraph:ttl").info()
    assert info is not None and info.expires_at is not None


def test_copy_thread_gives_an_independent_thread(any_store_url: str) -> None:
    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        graph = agent_graph(saver)
        src, dst = {"configurable": {"thread_id": "a"}}, {"configurable": {"thread_id": "b"}}
        graph.invoke({"messages": [HumanMessage("weather in Paris?")]}, src)
        saver.copy_thread("a", "b")
        graph.invoke(Command(resume="from b"), dst)
        assert graph.get_state(src).next == ("tools",)
        assert shape(graph.get_state(dst).values["messages"])[2] == (
            "tool",
            "Paris: sunny (from b)",
            [],
        )
        with pytest.raises(memvault.ConflictError):
            saver.copy_thread("a", "b")


async def test_each_face_needs_its_store(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        saver = MemvaultSaver(store)
        with pytest.raises(memvault.ConfigurationError, match="async_store="):
            await saver.aget_tuple({"configurable": {"thread_id": "x"}})
    with pytest.raises(memvault.ConfigurationError, match="store="):
        MemvaultSaver()


def test_memvault_snapshots_and_rollback_name_checkpoints(any_store_url: str) -> None:
    from tests.support.langgraph_graphs import echo_graph

    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        graph = echo_graph(saver)
        cfg = {"configurable": {"thread_id": "r"}}
        assert saver.store is not None
        thread = saver.store.session("langgraph:r")
        for n in range(40):  # more nodes than a saver reads when it remembers the rest
            graph.invoke({"messages": [HumanMessage(f"turn {n}")]}, cfg)
        thread.snapshot("after-40")
        for n in range(40, 45):
            graph.invoke({"messages": [HumanMessage(f"turn {n}")]}, cfg)
        assert len(graph.get_state(cfg).values["messages"]) == 90
        thread.rollback("after-40")
        assert shape(graph.get_state(cfg).values["messages"])[-1] == ("ai", "echo: turn 39", [])
        graph.invoke({"messages": [HumanMessage("again")]}, cfg)
        messages = graph.get_state(cfg).values["messages"]
        with MemvaultSaver.from_conn_string(any_store_url) as fresh:  # nothing remembered
            if fresh.store is not None and not any_store_url.startswith("memory"):
                assert shape(echo_graph(fresh).get_state(cfg).values["messages"]) == shape(messages)
    assert len(messages) == 82 and shape(messages)[-1] == ("ai", "echo: again", [])


def test_a_value_that_does_not_extend_its_parent_is_stored_whole(any_store_url: str) -> None:
    from langchain_core.messages import RemoveMessage

    from tests.support.langgraph_graphs import echo_graph

    with MemvaultSaver.from_conn_string(any_store_url) as saver:
        graph = echo_graph(saver)
        cfg = {"configurable": {"thread_id": "w"}}
        for n in range(3):
            graph.invoke({"messages": [HumanMessage(f"turn {n}", id=f"h{n}")]}, cfg)
        graph.update_state(
            cfg, {"messages": [RemoveMessage(id="h1"), HumanMessage("turn 0, edited", id="h0")]}
        )
        graph.invoke({"messages": [HumanMessage("last")]}, cfg)
        got = saver.get_tuple(cfg)
    assert got is not None
    assert shape(got.checkpoint["channel_values"]["messages"]) == [
        ("human", "turn 0, edited", []),
        ("ai", "echo: turn 0", []),
        ("ai", "echo: turn 1", []),
        ("human", "turn 2", []),
        ("ai", "echo: turn 2", []),
        ("human", "last", []),
        ("ai", "echo: last", []),
    ]


def test_a_saver_sees_what_another_saver_did_to_the_thread(any_store_url: str) -> None:
    from tests.support.langgraph_graphs import echo_graph

    with memvault.open(any_store_url) as store:
        mine, other = echo_graph(MemvaultSaver(store)), echo_graph(MemvaultSaver(store))
        cfg = {"configurable": {"thread_id": "shared"}}
        mine.invoke({"messages": [HumanMessage("one")]}, cfg)
        assert len(mine.get_state(cfg).values["messages"]) == 2  # mine now knows the thread
        other.invoke({"messages": [HumanMessage("two")]}, cfg)
        assert shape(mine.get_state(cfg).values["messages"])[-1] == ("ai", "echo: two", [])
        other.checkpointer.delete_thread("shared")  # then the same number of writes again
        other.invoke({"messages": [HumanMessage("three")]}, cfg)
        other.invoke({"messages": [HumanMessage("four")]}, cfg)
        assert shape(mine.get_state(cfg).values["messages"]) == [
            ("human", "three", []),
            ("ai", "echo: three", []),
            ("human", "four", []),
            ("ai", "echo: four", []),
        ]


def test_writes_resolve_as_on_in_memory_saver(any_store_url: str) -> None:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.serde.types import INTERRUPT

    def writes(saver: Any) -> Any:
        cfg = saver.put(
            {"configurable": {"thread_id": "w", "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )
        saver.put_writes(cfg, [("ch", "first"), (INTERRUPT, "ask 1")], "task-b", "b")
        saver.put_writes(cfg, [("ch", "second"), (INTERRUPT, "ask 2")], "task-b", "b")
        saver.put_writes(cfg, [("ch", "other task")], "task-a", "a")
        return saver.get_tuple(cfg).pending_writes

    with memvault.open(any_store_url) as store:
        assert (
            writes(MemvaultSaver(store))
            == writes(InMemorySaver())
            == [
                ("task-a", "ch", "other task"),
                ("task-b", INTERRUPT, "ask 2"),
                ("task-b", "ch", "first"),
            ]
        )
