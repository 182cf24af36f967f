"""``memvault demo``: a scripted agent conversation, across two processes.

Process A (agent-1) answers a weather question with a tool call and saves a
snapshot. Process B (agent-2) opens the same store, gets a broken tool result,
rolls back to the snapshot and answers again. The parent process then reads the
store as a third process would and prints the timeline.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable

import memvault
from memvault.messages import Message, ToolCall

SESSION = "memvault-demo"


def agent_one(url: str) -> None:
    """First worker process: a good turn with a tool call, then a checkpoint."""
    writer = f"agent-1 (pid {multiprocessing.current_process().pid})"
    with memvault.open(url, writer=writer) as store:
        s = store.session(SESSION)
        s.append([Message.system("You are a concise travel assistant.")])
        s.append([
            Message.user("What's the weather in Paris?"),
            Message.assistant(None, tool_calls=[
                ToolCall(id="call-1", name="get_weather", arguments='{"city": "Paris"}')]),
            Message.tool('{"temp_c": 18, "sky": "sunny"}', tool_call_id="call-1"),
            Message.assistant("It is 18 °C and sunny in Paris."),
        ])
        s.snapshot("after-weather")


# Each agent opens the store with its own writer label, as agent_one does: alike in
# shape only.
def agent_two(url: str) -> None:
    """Second worker process: a bad tool result, caught and rolled back."""
    writer = f"agent-2 (pid {multiprocessing.current_process().pid})"
    with memvault.open(url, writer=writer) as store:
        s = store.session(SESSION)
        s.append([
            Message.user("And in Tokyo?"),
            Message.assistant(None, tool_calls=[
                ToolCall(id="call-2", name="get_weather", arguments='{"city": "Tokyo"}')]),
            Message.tool("<html>502 Bad Gateway</html>", tool_call_id="call-2"),
        ])
        # The tool result is garbage: restore the last good state, then retry.
        s.rollback("after-weather")
        s.append([
            Message.user("And in Tokyo?"),
            Message.assistant(None, tool_calls=[
                ToolCall(id="call-3", name="get_weather", arguments='{"city": "Tokyo"}')]),
            Message.tool('{"temp_c": 24, "sky": "cloudy"}', tool_call_id="call-3"),
            Message.assistant("It is 24 °C and cloudy in Tokyo."),
        ])


def run_in_process(target: Callable[[str], None], url: str) -> None:
    """Run one agent in its own process; raise if it failed."""
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=target, args=(url,))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"demo worker {target.__name__} exited with code {proc.exitcode}")
