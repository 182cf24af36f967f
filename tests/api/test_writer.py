"""The default writer label of the event log: ``host:pid`` of the process that writes."""

from __future__ import annotations

import os
import socket
import sys

import pytest

import memvault


def _last_writer(store: memvault.Store) -> str:
    store.session("s").append([memvault.Message.user("hi")])
    return store.session("s").log()[-1].writer


def test_the_default_writer_is_host_and_pid() -> None:
    with memvault.open("memory://") as store:
        assert _last_writer(store) == f"{socket.gethostname()}:{os.getpid()}"


@pytest.mark.skipif(sys.platform == "win32", reason="needs os.fork")
def test_a_forked_process_writes_under_its_own_pid() -> None:
    """The label is made once per process, and again in a child after a fork."""
    with memvault.open("memory://") as store:
        _last_writer(store)  # the parent's label is in use before the fork
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report the label its write logged, then leave
            try:
                os.write(write, _last_writer(store).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as pipe:
            assert pipe.read() == f"{socket.gethostname()}:{pid}"
