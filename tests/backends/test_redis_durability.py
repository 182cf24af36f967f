"""Acknowledged turns survive a server crash when Redis is configured to keep them
(``appendonly yes``, ``appendfsync always``), on a private redis-server process."""

from __future__ import annotations

from pathlib import Path

import pytest

from memvault.checks.opener import Opener
from memvault.testing.workers import turn
from tests.support.redis import RedisServer


@pytest.mark.parametrize("face", ["sync", "async"])
def test_acknowledged_turns_survive_a_killed_server(tmp_path: Path, face: str) -> None:
    """Append, snapshot, pop; SIGKILL the server (no shutdown save); restart it on
    the same files: history, snapshots, log and info read exactly as acknowledged."""
    server = RedisServer(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always")
    try:
        first = Opener(server.url, face)()  # type: ignore[arg-type]
        try:
            s = first.session("s")
            for i in range(50):
                s.append(turn("w", i))
            s.snapshot("cp")
            s.pop()
            state = (s.history(), s.snapshots(), s.log(), s.info())
        finally:
            first.close()
        server.kill()
        server.start()
        second = Opener(server.url, face)()  # type: ignore[arg-type]
        try:
            t = second.session("s")
            assert (t.history(), t.snapshots(), t.log(), t.info()) == state
            assert len(state[0]) == 99
            t.rollback("cp")
            assert len(t.history()) == 100
        finally:
            second.close()
    finally:
        server.kill()
