"""Functions run in worker processes by the contract suite (importable, picklable)."""

from __future__ import annotations

from typing import Any

from memvault.checks.opener import Opener
from memvault.messages import Message


def turn(writer: str, i: int) -> list[Message]:
    """A 2-message turn whose ids and texts name writer and index."""
    return [
        Message(id=f"{writer}-{i}-q", role="user", content=f"{writer} q{i}"),
        Message(id=f"{writer}-{i}-a", role="assistant", content=f"{writer} a{i}"),
    ]


def append_turns(opener: Opener, session_id: str, writer: str, count: int) -> int:
    """Append ``count`` turns, one append each; returns the last version seen."""
    store = opener(writer=writer)
    try:
        s = store.session(session_id)
        version = 0
        for i in range(count):
            version = s.append(turn(writer, i))
        return version
    finally:
        store.close()


# Each worker opens its own store and closes it: the try/finally of every worker here.
def checkpoint_then_exit(opener: Opener, session_id: str) -> None:
    """Process A: a good conversation, two snapshots."""
    store = opener(writer="A")
    try:
        s = store.session(session_id)
        s.append(turn("good", 0))
        s.snapshot("after-0")
        s.append(turn("good", 1))
        s.snapshot("after-1")
    finally:
        store.close()


def bad_turns_then_rollback(opener: Opener, session_id: str) -> str:
    """Process B: append a bad tool result, roll back to the last good snapshot."""
    store = opener(writer="B")
    try:
        s = store.session(session_id)
        s.append([Message.assistant("calling tool"), Message.tool("garbage", tool_call_id="t")])
        return str(s.rollback("after-1").name)
    finally:
        store.close()


def observe(opener: Opener, session_id: str) -> dict[str, Any]:
    """Process C: what a fresh process sees."""
    store = opener(writer="C")
    try:
        s = store.session(session_id)
        return {
            "history": [m.id for m in s.history()],
            "snapshots": [(x.name, x.length, x.version) for x in s.snapshots()],
            "ops": [(e.op, e.writer) for e in s.log()],
        }
    finally:
        store.close()
