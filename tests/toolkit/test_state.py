"""dump_state: identical across backends for the same operations; readable diffs;
the syrupy baseline through the plugin's store_snapshot fixture."""

from __future__ import annotations

from typing import Any

import pytest

import memvault
from memvault import Message, ToolCall
from memvault.testing import diff_states, dump_state, render_state


def agent_flow(store: Any) -> None:
    """A small agent conversation: turns, a tool call, a snapshot, a bad tool
    result rolled back, a fork, a trim."""
    s = store.session("user-42")
    s.append([Message.system("be brief"), Message.user("My name is Wang")])
    s.append([Message.assistant("Got it, Wang", metadata={"model": "m1"})])
    s.snapshot("before-tool")
    s.append(
        [
            Message.assistant(
                None, tool_calls=[ToolCall(id="c1", name="search", arguments='{"q": "wang"}')]
            ),
            Message.tool("garbage \x00", tool_call_id="c1"),
        ]
    )
    s.rollback("before-tool")
    s.fork("user-42-retry")
    s.append([Message.user("What is my name?", id="fixed-id")])
    s.pop()
    store.session("other").append([Message.user("é👍")])
    store.session("other").trim(keep_last=0)


def test_same_operations_dump_identically_on_every_backend(any_store_url: str) -> None:
    """The dump is a logical state: memory://, SQLite (and every backend in the
    registry) give the very same dump for the same operations."""
    with memvault.open("memory://") as ref, memvault.open(any_store_url) as store:
        agent_flow(ref)
        agent_flow(store)
        assert dump_state(store) == dump_state(ref)
        assert diff_states(dump_state(ref), dump_state(store)) == []


def test_dump_is_stable_and_readable(memvault_store: Any) -> None:
    agent_flow(memvault_store)
    state = dump_state(memvault_store)
    session = state["sessions"]["user-42"]
    assert [m["id"] for m in session["history"]] == ["<id:1>", "<id:2>", "<id:3>"]
    assert session["history"][0] == {
        "id": "<id:1>",
        "role": "system",
        "content": "be brief",
        "created_at": "<time>",
    }
    assert [s["name"] for s in session["snapshots"]] == ["before-tool", "auto:pre-rollback@v3"]
    assert session["log"][-1]["op"] == "pop"
    assert session["log"][-1]["detail"] == {"message_id": "fixed-id"}
    assert {e["writer"] for e in session["log"]} == {"<writer:1>"}
    assert render_state(state) == render_state(dump_state(memvault_store))


def test_diff_names_session_and_missing_extra_changed_messages() -> None:
    with memvault.open("memory://") as a, memvault.open("memory://") as b:
        sent = [Message.user(f"m{i}", id=f"id{i}") for i in range(4)]
        a.session("s").append(sent)
        b.session("s").append(
            [
                sent[0],
                sent[2],
                sent[3].model_copy(update={"content": "x"}),
                Message.user("new", id="id9"),
            ]
        )
        a.session("s").snapshot("cp")
        a.session("gone").append([Message.user("bye", id="b")])
        lines = diff_states(dump_state(a), dump_state(b))
    text = "\n".join(lines)
    assert "session 'gone': missing (1 messages)" in lines
    assert "session 's' history: missing message 2 (user id1: \"m1\")" in text
    assert "changed message 4 (user id3: \"m3\"): content: 'm3' -> 'x'" in text
    assert "session 's' history: extra message 4 (user id9: \"new\")" in text
    assert "session 's': missing snapshot 'cp'" in text


def test_store_snapshot_matches_committed_baseline(
    memvault_store: Any, store_snapshot: Any
) -> None:
    """The committed baseline (__snapshots__/) equals today's dump: any change in
    what the operations store shows up here. Regenerate with --snapshot-update."""
    agent_flow(memvault_store)
    assert store_snapshot == memvault_store


def test_store_snapshot_mismatch_names_what_changed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_flow="""
import os
from memvault import Message

def test_flow(memvault_store, store_snapshot):
    s = memvault_store.session("user-42")
    s.append([Message.user("hello", id="a"), Message.user("world", id="b")])
    if os.environ.get("FLOW_CHANGED"):
        s.pop()
        s.append([Message.user("WORLD", id="c")])
    assert store_snapshot == memvault_store
"""
    )
    pytester.runpytest("--snapshot-update", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    monkeypatch.setenv("FLOW_CHANGED", "1")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*session 'user-42': version 1 -> 3*",
            "*session 'user-42' history: changed message 2 (user b: \"world\"): "
            "content: 'world' -> 'WORLD', id: 'b' -> 'c'*",
        ]
    )
