"""A session that exercises every part of the inspector's timeline."""

from __future__ import annotations

import socket

import memvault
from memvault import Message, ToolCall

HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="alert(1)">'
HOSTILE_LINK = "javascript:alert(document.cookie)"
HOSTILE_ID = 'ses"<b>sion</b>/../x'


def seed(store: memvault.Store, session_id: str = "agent-1") -> memvault.Session:
    """Append, tool call and result, snapshot, a bad turn, rollback, pop, trim.

    Versions: 1 append (2), 2 append (call + result), snapshot 'good', 3 append (bad),
    4 rollback to 'good' (saves auto:pre-rollback@v3), 5 append, 6 pop, 7 trim(keep_last=4).
    """
    s = store.session(session_id)
    s.append([Message.system("You are a weather agent."), Message.user("Weather in Paris?")])
    s.append(
        [
            Message.assistant(
                None,
                tool_calls=[
                    ToolCall(
                        id="call_1", name="get_weather", arguments='{"city": "Paris", "unit": "C"}'
                    )
                ],
            ),
            Message.tool("18 C, sunny", tool_call_id="call_1"),
        ]
    )
    s.snapshot("good")
    s.append([Message.assistant(HOSTILE), Message.user(f"[click]({HOSTILE_LINK})")])
    s.rollback("good")
    s.append([Message.assistant("It is 18 C and sunny in Paris."), Message.user("Thanks")])
    s.pop()
    s.trim(keep_last=4)
    return s


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
