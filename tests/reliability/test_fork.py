"""A store opened before ``os.fork()`` and used on both sides of it (a
``multiprocessing`` worker with the ``fork`` start method, a web server's preloaded
app): the child gets connections of its own, the parent keeps its own, and nothing
either of them was told is stored goes missing."""

from __future__ import annotations

import asyncio
import os

import pytest

import memvault
from tests.support.forking import exit_code, run_in_child, start_child

TURNS = 60

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def turn(who: str, n: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"{who} {n}"},
        {"role": "assistant", "content": f"{who} {n} answered"},
    ]


def test_a_parent_and_its_forked_child_write_at_once(any_store_url: str) -> None:
    """Both append to sessions of their own at the same time through the store the
    parent opened; the child closes it when done, and so does a second child that
    never used it, and the parent goes on. Each
    connection carries one process's requests only: with the parent's PostgreSQL
    connections shared, the child's appends failed ("prepared statement already
    exists") after some went through, and its close would end the parent's."""
    if any_store_url == "memory://":
        pytest.skip("memory:// is per process")
    store = memvault.open(any_store_url)
    parent = store.session("parent")
    parent.append(turn("parent", -1))
    go_r, go_w = os.pipe()

    def child() -> int:
        os.read(go_r, 1)
        session = store.session("child")
        for n in range(TURNS):
            session.append(turn("child", n))
        code = 0 if len(session.history()) == 2 * TURNS else 2
        store.close()
        return code

    def closer() -> int:  # a child that only closes the store: its copy of it
        store.close()
        return 0

    pid = start_child(child)
    try:
        os.write(go_w, b"1")
        for n in range(TURNS):
            parent.append(turn("parent", n))
        assert exit_code(pid) == 0
        assert run_in_child(closer) == 0
        parent.append(turn("parent", TURNS))  # after both children closed the store
    finally:
        store.close()
    with memvault.open(any_store_url) as again:
        assert [m.content for m in again.session("parent").history()][::2] == [
            f"parent {n}" for n in range(-1, TURNS + 1)
        ]
        assert [m.content for m in again.session("child").history()][::2] == [
            f"child {n}" for n in range(TURNS)
        ]


def test_a_forked_child_uses_an_async_store(any_store_url: str) -> None:
    """The async face, used by the parent on its event loop before the fork, then by
    the child on a loop of its own (the child closes it when done), then by the parent
    again on its loop. An async store belongs to one event loop; the child, a new
    process, gets connections of its own on its own. Before, the child's calls failed
    on PostgreSQL and Redis (futures of the parent's loop), and on PostgreSQL its
    close ended the parent's connections: the parent's next call hung."""
    if any_store_url == "memory://":
        pytest.skip("memory:// is per process")

    async def append(store: memvault.AsyncStore, who: str, turns: range) -> int:
        session = store.session(who)
        for n in turns:
            await session.append(turn(who, n))
        return len(await session.history())

    loop = asyncio.new_event_loop()
    store = memvault.open_async(any_store_url)
    try:
        assert loop.run_until_complete(append(store, "parent", range(1))) == 2

        async def child() -> int:
            try:
                return await asyncio.wait_for(append(store, "child", range(TURNS)), 30)
            finally:
                await store.close()

        assert run_in_child(lambda: 0 if asyncio.run(child()) == 2 * TURNS else 2) == 0
        assert (
            loop.run_until_complete(asyncio.wait_for(append(store, "parent", range(1, TURNS)), 30))
            == 2 * TURNS
        )
    finally:
        loop.run_until_complete(store.close())
        loop.close()
    with memvault.open(any_store_url) as again:
        assert [again.session(who).info().length for who in ("child", "parent")] == [
            2 * TURNS,
            2 * TURNS,
        ]
