"""Run a function in a forked child and read its exit code (the fork tests)."""

from __future__ import annotations

import os
from collections.abc import Callable


def start_child(body: Callable[[], int]) -> int:
    """Fork; the child runs ``body`` and exits with its code (1 if it raised)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = body()
        finally:
            os._exit(code)
    return pid


def exit_code(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_in_child(body: Callable[[], int]) -> int:
    return exit_code(start_child(body))
