"""``memvault demo``: a scripted agent conversation, across two processes.

Process A (agent-1) answers a weather question with a tool call and saves a
snapshot. Process B (agent-2) opens the same store, gets a broken tool result,
rolls back to the snapshot and answers again. The parent process then reads the
store as a third process would and prints the timeline.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from collections.abc import Callable
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection

import memvault
from memvault.errors import MemvaultError
from memvault.messages import Message, ToolCall

SESSION = "memvault-demo"


def agent_one(url: str) -> None:
    """First worker process: a good turn with a tool call, then a checkpoint."""
    writer = f"agent-1 (pid {multiprocessing.current_process().pid})"
    with memvault.open(url, writer=writer) as store:
        s = store.session(SESSION)
        s.append([Message.system("You are a concise travel assistant.")])
        s.append(
            [
                Message.user("What's the weather in Paris?"),
                Message.assistant(
                    None,
                    tool_calls=[
                        ToolCall(id="call-1", name="get_weather", arguments='{"city": "Paris"}')
                    ],
                ),
                Message.tool('{"temp_c": 18, "sky": "sunny"}', tool_call_id="call-1"),
                Message.assistant("It is 18 °C and sunny in Paris."),
            ]
        )
        s.snapshot("after-weather")


# Each agent opens the store with its own writer label, as agent_one does: alike in
# shape only.
def agent_two(url: str) -> None:
    """Second worker process: a bad tool result, caught and rolled back."""
    writer = f"agent-2 (pid {multiprocessing.current_process().pid})"
    with memvault.open(url, writer=writer) as store:
        s = store.session(SESSION)
        s.append(
            [
                Message.user("And in Tokyo?"),
                Message.assistant(
                    None,
                    tool_calls=[
                        ToolCall(id="call-2", name="get_weather", arguments='{"city": "Tokyo"}')
                    ],
                ),
                Message.tool("<html>502 Bad Gateway</html>", tool_call_id="call-2"),
            ]
        )
        # The tool result is garbage: restore the last good state, then retry.
        s.rollback("after-weather")
        s.append(
            [
                Message.user("And in Tokyo?"),
                Message.assistant(
                    None,
                    tool_calls=[
                        ToolCall(id="call-3", name="get_weather", arguments='{"city": "Tokyo"}')
                    ],
                ),
                Message.tool('{"temp_c": 24, "sky": "cloudy"}', tool_call_id="call-3"),
                Message.assistant("It is 24 °C and cloudy in Tokyo."),
            ]
        )


class DemoFailed(MemvaultError):
    """A demo worker process failed; the message names it and its error."""


def _work(target: Callable[[str], None], url: str, report: Connection) -> None:
    """A worker's body: its error goes to the parent as one line, never a traceback."""
    try:
        target(url)
    except Exception as exc:  # any failure: the parent reports it
        report.send(f"{type(exc).__name__}: {exc}")
        sys.exit(1)


def run_in_process(target: Callable[[str], None], url: str) -> None:
    """Run one agent in its own process; raise :class:`DemoFailed` if it failed.

    The worker starts with SIGINT blocked (the mask is inherited through exec), so
    Ctrl-C, which a terminal sends to the whole process group, interrupts only this
    process: it stops the worker and raises ``KeyboardInterrupt`` (one line in the
    CLI), and no worker prints a traceback, whatever it was doing.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_work, args=(target, url, send))
    resource_tracker.ensure_running()  # starting it unblocks SIGINT: start it first
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C meanwhile lands now
        send.close()
        proc.join()
    except BaseException:
        if proc.is_alive():
            proc.terminate()
            proc.join()
        raise
    if proc.exitcode != 0:
        why = receive.recv() if receive.poll() else f"exit code {proc.exitcode}"
        raise DemoFailed(f"demo worker {target.__name__} failed: {why}")
