"""MemvaultSaver keeps decoded values in memory: it must never show a stale or mutated one.

A saver decodes a channel's value once per stored node and hands out copies. These
tests do what breaks a naive cache: mutate what ``get_tuple`` returned, in every
nested field, and read again; remove a thread's checkpoints behind the saver's back
(another saver's ``delete_thread``, a memvault rollback, TTL expiry, a copied
thread) and put the same checkpoint ids again with other values; read with the
wrong key of an ``EncryptedSerializer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import BaseModel, ConfigDict

import memvault
from memvault.integrations._langgraph_values import Grown, fresh
from memvault.integrations.langgraph import MemvaultSaver


def message(text: str) -> BaseMessage:
    if not text.startswith("ai"):
        return HumanMessage(text, id=text)
    return AIMessage(
        text,
        id=text,
        additional_kwargs={"k": [text]},
        response_metadata={"model": "m", "usage": {"in": 1}},
        tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": text}],
    )


def args(
    thread: str,
    cid: str,
    texts: list[str],
    parent: str | None = None,
    messages: list[BaseMessage] | None = None,
) -> tuple[Any, ...]:
    """The arguments of a ``put`` of checkpoint ``cid`` holding ``texts`` (or ``messages``)."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = cid
    checkpoint["channel_values"] = {
        "messages": messages or [message(t) for t in texts],
        "n": len(texts),
    }
    checkpoint["channel_versions"] = {"messages": cid, "n": cid}
    where = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        where["checkpoint_id"] = parent
    return {"configurable": where}, checkpoint, {"source": "loop", "step": int(cid)}, {}


def put(
    saver: Any,
    thread: str,
    cid: str,
    texts: list[str],
    parent: str | None = None,
    messages: list[BaseMessage] | None = None,
) -> None:
    saver.put(*args(thread, cid, texts, parent, messages))


def read(saver: Any, thread: str, cid: str | None = None) -> list[BaseMessage] | None:
    where = {"thread_id": thread, "checkpoint_ns": ""}
    if cid is not None:
        where["checkpoint_id"] = cid
    got = saver.get_tuple({"configurable": where})
    return None if got is None else list(got.checkpoint["channel_values"]["messages"])


def texts(messages: list[BaseMessage] | None) -> list[str] | None:
    return None if messages is None else [str(m.content) for m in messages]


def test_mutating_what_get_tuple_returned_changes_nothing_stored(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        saver = MemvaultSaver(store)
        put(saver, "t", "1", ["h1", "ai1"])
        put(saver, "t", "2", ["h1", "ai1", "h2", "ai2"], parent="1")
        expected = read(MemvaultSaver(store), "t", "2")
        got = read(saver, "t", "2")
        assert got == expected and expected is not None
        # Everything a graph could do in place to what it was given.
        got.append(message("h-extra"))
        got[0].content = "edited"
        ai = got[1]
        assert isinstance(ai, AIMessage)
        ai.additional_kwargs["k"].append("x")
        ai.additional_kwargs["new"] = 1
        ai.response_metadata["usage"]["in"] = 99
        ai.tool_calls[0]["args"]["city"] = "Rome"
        ai.tool_calls.append({"name": "other", "args": {}, "id": "x", "type": "tool_call"})
        assert read(saver, "t", "2") == expected
        assert read(saver, "t", "1") == expected[:2]
        # The mutated list put as a child is stored as the graph gave it, not as the
        # unmutated parent plus a suffix.
        mutated = [m.model_copy(deep=True) for m in got]
        put(saver, "t", "3", [], parent="2", messages=got)
        assert read(saver, "t", "3") == mutated
        assert read(MemvaultSaver(store), "t", "3") == mutated  # nothing remembered


def test_editing_what_was_put_changes_nothing_a_child_is_compared_with(any_store_url: str) -> None:
    # A put keeps copies of what it was given, not decodings and not the objects:
    # a graph that edits its list or its messages after the put and puts a child
    # must find that child stored as it gave it, whole where the parent differs.
    with memvault.open(any_store_url) as store:
        saver = MemvaultSaver(store)
        given = [message("h1")]
        put(saver, "t", "1", [], messages=given)  # stored whole
        given[0].content = "h1, edited"
        given.append(message("ai1"))
        put(saver, "t", "2", [], parent="1", messages=given)  # differs from "1": whole
        given = [*given, message("ai2")]
        put(saver, "t", "3", [], parent="2", messages=given)  # extends "2"
        given[2].tool_calls[0]["args"]["city"] = "Rome"
        put(saver, "t", "4", [], parent="3", messages=[*given, message("h3")])
        reader = MemvaultSaver(store)
        assert texts(read(reader, "t", "1")) == ["h1"]
        assert texts(read(reader, "t", "2")) == ["h1, edited", "ai1"]
        third, fourth = read(reader, "t", "3"), read(reader, "t", "4")
        assert third is not None and fourth is not None
        assert texts(fourth) == ["h1, edited", "ai1", "ai2", "h3"]
        assert read(saver, "t", "4") == fourth
        calls = [m.tool_calls[0]["args"] for m in (third[2], fourth[2]) if isinstance(m, AIMessage)]
        assert calls == [{"city": "Paris"}, {"city": "Rome"}]


def test_the_latest_checkpoint_is_the_highest_id_still_visible(any_store_url: str) -> None:
    # get_tuple without a checkpoint id, from a log the saver extends as it goes:
    # the visible checkpoint of the highest id in the namespace, whatever order the
    # checkpoints were put in, and the next one down once delete_for_runs hid it.
    with memvault.open(any_store_url) as store:
        saver = MemvaultSaver(store)

        def put_in(ns: str, cid: str, run: str) -> None:
            config, checkpoint, _, _ = args("t", cid, [f"h{cid}"])
            config["configurable"]["checkpoint_ns"] = ns
            saver.put(config, checkpoint, {"source": "loop", "step": int(cid), "run_id": run}, {})

        def latest(ns: str = "") -> list[str | None]:
            got = [
                s.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ns}})
                for s in (saver, MemvaultSaver(store))
            ]  # and one that reads it all
            return [t and t.config["configurable"]["checkpoint_id"] for t in got]

        put_in("", "2", "run-a")
        put_in("", "3", "run-b")
        assert latest() == ["3", "3"]
        put_in("", "1", "run-c")
        put_in("sub", "0", "run-c")
        assert latest() == ["3", "3"] and latest("sub") == ["0", "0"]
        saver.delete_for_runs(["run-b"])
        assert latest() == ["2", "2"]
        saver.delete_for_runs(["run-a", "run-c"])
        assert latest() == [None, None] and latest("sub") == [None, None]


def test_delta_channel_seeds_are_copies_too(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        saver = MemvaultSaver(store)
        put(saver, "t", "1", ["h1", "ai1"])
        put(saver, "t", "2", ["h1", "ai1", "h2"], parent="1")
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "2"}}
        seed = saver.get_delta_channel_history(config=cfg, channels=["messages"])
        seed["messages"]["seed"].append(message("h-extra"))
        seed["messages"]["seed"][1].tool_calls[0]["args"]["city"] = "Rome"
        assert texts(read(saver, "t", "1")) == ["h1", "ai1"]
        assert read(saver, "t", "1") == read(MemvaultSaver(store), "t", "1")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now


def removals(store: Any, clock: Clock) -> dict[str, Callable[[], None]]:
    """Ways to remove thread t's checkpoints behind the back of the saver that read them."""
    thread = store.session("langgraph:t")
    return {
        "delete_thread by another saver": lambda: MemvaultSaver(store).delete_thread("t"),
        "memvault rollback": lambda: thread.rollback("start"),
        "TTL expiry": lambda: setattr(clock, "now", clock.now + 7200),
    }


@pytest.mark.parametrize(
    "how", ["delete_thread by another saver", "memvault rollback", "TTL expiry"]
)
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_checkpoints_put_again_after_a_removal_read_their_new_values(
    how: str, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(memvault.store, "time", clock)
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/c.db"
    with memvault.open(url, ttl=3600) as store:
        mine, other = MemvaultSaver(store), MemvaultSaver(store)
        put(mine, "t", "0", ["h0"])
        store.session("langgraph:t").snapshot("start")
        put(mine, "t", "1", ["h0", "h1"], parent="0")
        put(mine, "t", "2", ["h0", "h1", "ai1"], parent="1")
        assert texts(read(mine, "t", "2")) == ["h0", "h1", "ai1"]
        removals(store, clock)[how]()
        clock.now += 1  # a thread made again is made later
        # The same checkpoint ids, other values, put by another saver.
        put(other, "t", "0", ["x0"])
        put(other, "t", "1", ["x0", "x1"], parent="0")
        put(other, "t", "2", ["x0", "x1", "ai-x"], parent="1")
        assert texts(read(mine, "t", "2")) == ["x0", "x1", "ai-x"]
        assert texts(read(mine, "t")) == ["x0", "x1", "ai-x"]
        # A child of a checkpoint this saver put, then saw replaced, without reading it.
        put(other, "t", "3", ["x0", "x1", "ai-x", "x3"], parent="2")
        put(mine, "t", "4", ["x0", "x1", "ai-x", "x4"], parent="2")
        assert texts(read(MemvaultSaver(store), "t", "4")) == ["x0", "x1", "ai-x", "x4"]
        assert texts(read(mine, "t", "4")) == ["x0", "x1", "ai-x", "x4"]


def test_a_copied_thread_changed_by_another_saver_reads_its_own_values(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        mine, other = MemvaultSaver(store), MemvaultSaver(store)
        put(mine, "a", "1", ["h1"])
        put(mine, "a", "2", ["h1", "ai1"], parent="1")
        assert texts(read(mine, "a", "2")) == ["h1", "ai1"]
        mine.copy_thread("a", "b")
        assert texts(read(mine, "b", "2")) == ["h1", "ai1"]
        other.delete_thread("b")
        put(other, "b", "1", ["y1"])
        put(other, "b", "2", ["y1", "ai-y"], parent="1")
        assert texts(read(mine, "b", "2")) == ["y1", "ai-y"]
        assert texts(read(mine, "a", "2")) == ["h1", "ai1"]


def test_a_saver_with_another_key_reads_nothing_another_saver_decoded(any_store_url: str) -> None:
    from cryptography.fernet import InvalidToken
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

    from tests.integrations.test_integration_langgraph import FernetCipher

    right, wrong = (EncryptedSerializer(FernetCipher()) for _ in range(2))
    with memvault.open(any_store_url) as store:
        mine = MemvaultSaver(store, serde=right)
        put(mine, "t", "1", ["secret"])
        put(mine, "t", "2", ["secret", "ai-secret"], parent="1")
        assert texts(read(mine, "t", "2")) == ["secret", "ai-secret"]
        with pytest.raises(InvalidToken):
            read(MemvaultSaver(store, serde=wrong), "t", "2")
        assert texts(read(MemvaultSaver(store, serde=right), "t", "2")) == ["secret", "ai-secret"]


def test_a_saver_that_just_wrote_still_sees_what_others_wrote_around_it(any_store_url: str) -> None:
    with memvault.open(any_store_url) as store:
        mine, other = MemvaultSaver(store), MemvaultSaver(store)
        put(mine, "t", "1", ["h1"])
        assert texts(read(mine, "t")) == ["h1"]
        put(other, "t", "2", ["h1", "other"], parent="1")  # between mine's read and write
        put(mine, "t", "3", ["h1", "mine"], parent="1")
        assert texts(read(mine, "t", "2")) == ["h1", "other"]
        other.put_writes(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "3"}},
            [("ch", "w")],
            "task",
        )
        put(mine, "t", "4", ["h1", "mine", "again"], parent="3")
        got = mine.get_tuple(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "3"}}
        )
        assert got is not None and got.pending_writes == [("task", "ch", "w")]
        assert [
            t.config["configurable"]["checkpoint_id"]
            for t in mine.list({"configurable": {"thread_id": "t"}})
        ] == ["4", "3", "2", "1"]


def test_a_child_put_without_reading_after_another_saver_remade_the_thread_reads_back(
    any_store_url: str,
) -> None:
    # Two savers on two handles of one store (memory:// holds nothing across handles:
    # there both savers share one). The other saver deletes the thread and puts the
    # same checkpoint ids with the same messages, so the thread's version is again
    # what the first saver last saw; the first then puts a child of a checkpoint
    # whose stored node is gone, without reading first.
    with (
        memvault.open(any_store_url) as store,
        (
            memvault.open(any_store_url)
            if not any_store_url.startswith("memory:")
            else contextlib.nullcontext(store)
        ) as elsewhere,
    ):
        mine, other = MemvaultSaver(store), MemvaultSaver(elsewhere)
        put(mine, "t", "1", ["h1"])
        put(mine, "t", "2", ["h1", "ai1"], parent="1")
        other.delete_thread("t")
        put(other, "t", "1", ["h1"])
        put(other, "t", "2", ["h1", "ai1"], parent="1")
        put(mine, "t", "3", ["h1", "ai1", "h3"], parent="2")
        assert texts(read(MemvaultSaver(elsewhere), "t", "3")) == ["h1", "ai1", "h3"]
        assert texts(read(mine, "t", "3")) == ["h1", "ai1", "h3"]
        assert texts(read(other, "t", "2")) == ["h1", "ai1"]


async def test_the_same_put_without_reading_on_async_stores(any_store_url: str) -> None:
    async with MemvaultSaver.from_conn_string(any_store_url) as mine:
        shared = any_store_url.startswith("memory:")
        async with (
            contextlib.nullcontext(mine)
            if shared
            else MemvaultSaver.from_conn_string(any_store_url)
        ) as elsewhere:
            other = MemvaultSaver(async_store=elsewhere.async_store)
            await mine.aput(*args("t", "1", ["h1"]))
            await mine.aput(*args("t", "2", ["h1", "ai1"], parent="1"))
            await other.adelete_thread("t")
            await other.aput(*args("t", "1", ["h1"]))
            await other.aput(*args("t", "2", ["h1", "ai1"], parent="1"))
            await mine.aput(*args("t", "3", ["h1", "ai1", "h3"], parent="2"))
            got = await elsewhere.aget_tuple(
                {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "3"}}
            )
            assert got is not None
            assert texts(got.checkpoint["channel_values"]["messages"]) == ["h1", "ai1", "h3"]


def test_a_long_thread_written_by_one_saver_reads_as_a_fresh_saver_reads_it(
    any_store_url: str,
) -> None:
    # the writer's log of the thread is extended at each put, its indexes folded
    # many times (Grown); a fresh saver reads the whole chain at once
    with memvault.open(any_store_url) as store:
        mine = MemvaultSaver(store)
        history: list[str] = []
        for n in range(1, 301):
            history = [*history[-3:], f"h{n}"]
            put(mine, "t", f"{n:04}", history, parent=f"{n - 1:04}" if n > 1 else None)
            if n % 7 == 0:
                mine.put_writes(
                    {
                        "configurable": {
                            "thread_id": "t",
                            "checkpoint_ns": "",
                            "checkpoint_id": f"{n:04}",
                        }
                    },
                    [("ch", n)],
                    "task",
                )
        fresh_saver = MemvaultSaver(store)
        for n in (1, 7, 64, 65, 150, 299, 300):
            cid = f"{n:04}"
            got, want = (
                saver.get_tuple(
                    {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}}
                )
                for saver in (mine, fresh_saver)
            )
            assert got is not None and want is not None
            assert got.checkpoint == want.checkpoint and got.metadata == want.metadata
            assert got.pending_writes == want.pending_writes
            assert (got.pending_writes == [("task", "ch", n)]) == (n % 7 == 0)
        assert [t.config for t in mine.list(None)] == [t.config for t in fresh_saver.list(None)]


def test_grown_copies_change_independently() -> None:
    grown: Grown[int, int] = Grown()
    copies = []
    for i in range(500):  # past several folds
        grown[i] = i
        copies.append(grown)
        grown = grown.copy()
    grown[0] = -1  # an entry of the shared base, replaced in this copy only
    for i, copy in enumerate(copies):
        assert dict(copy.items()) == {k: k for k in range(i + 1)}
        assert list(copy) == list(range(i + 1))
    assert grown[0] == -1 and grown.get(499) == 499 and 500 not in grown and 0 in grown
    assert grown.setdefault(1, 7) == 1 and grown.setdefault(500, 7) == 7 and grown[500] == 7
    assert copies[-1].get(500) is None and copies[0][0] == 0


class Ambiguous:
    """A value without a truth value, like a numpy array."""

    def __bool__(self) -> bool:
        raise ValueError("ambiguous")


class Holder(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    value: Any
    items: list[Any] = []


def test_a_copy_never_asks_a_value_for_its_truth() -> None:
    held = Holder(value=Ambiguous(), items=[Ambiguous()])
    copied = fresh(held)
    assert type(copied) is Holder and copied is not held
    assert type(copied.value) is Ambiguous and copied.value is not held.value
    assert type(copied.items[0]) is Ambiguous and copied.items[0] is not held.items[0]
    assert copied.model_fields_set == held.model_fields_set
    assert copied.model_fields_set is not held.model_fields_set
