"""Each session operation is one round trip: a single EVALSHA on the wire (fork and
pop: two)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis.connection

import memvault
from memvault.messages import Message
from tests.support.redis import flushed

OPERATIONS: dict[str, tuple[int, Callable[[Any], Any]]] = {
    "append": (1, lambda s: s.append([Message.user("x"), Message.assistant("y")])),
    "history": (1, lambda s: s.history()),
    "history(last=20)": (1, lambda s: s.history(last=20)),
    "info": (1, lambda s: s.info()),
    # read and decode the message, then pop it (a pop whose message cannot be returned
    # changes nothing); the pop checks it is still the same message (its SHA-1)
    "pop": (2, lambda s: s.pop()),
    "trim": (1, lambda s: s.trim(keep_last=1)),
    "clear": (1, lambda s: s.clear()),
    "snapshot": (1, lambda s: s.snapshot("new")),
    "snapshots": (1, lambda s: s.snapshots()),
    "rollback": (1, lambda s: s.rollback("cp")),
    "log": (1, lambda s: s.log()),
    "fork": (2, lambda s: s.fork("copy")),  # read the source, write the copy
    "delete": (1, lambda s: s.delete()),
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_operation_round_trips(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failing: an operation reads and then writes from Python, or sends extra
    commands (each would be another network round trip, and a race)."""
    expected, operation = OPERATIONS[name]
    with memvault.open(flushed()) as store:
        s = store.session("s")
        s.append([Message.user(f"m{i}") for i in range(30)])  # connects, loads the scripts
        s.snapshot("cp")
        sent: list[bytes] = []
        send = redis.connection.AbstractConnection.send_packed_command

        def spy(self: Any, command: Any, check_health: bool = True) -> None:
            sent.append(b"".join(command) if isinstance(command, list) else command)
            send(self, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", spy)
        operation(s)
        monkeypatch.undo()
    assert len(sent) == expected
    assert all(b"EVALSHA" in packet for packet in sent)
