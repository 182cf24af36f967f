"""The private PostgreSQL that the torture runs and the restart tests use must come
back after every kill. A killed postmaster left as a zombie (its parent killed before
it reaped it, and PID 1 here never reaps orphans) keeps its id alive for
``kill(pid, 0)``, so the next postmaster refuses to start: "lock file postmaster.pid
already exists". A backend left running holds the old shared memory, and the next
start refuses too."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memvault.torture.servers import PostgresServer, start_server


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    private = start_server("postgres")
    assert isinstance(private, PostgresServer)
    try:
        yield private
    finally:
        private.close()


def _processes_in(data: Path) -> list[int]:
    """Live processes working in ``data`` (a postmaster's and its children's cwd)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/cwd").resolve() == data.resolve():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _exists(pid: int) -> bool:
    """What PostgreSQL's lock-file check asks: does ``pid`` exist at all (a zombie does)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.mark.slow
def test_a_killed_server_leaves_nothing_behind_and_starts_again(server: PostgresServer) -> None:
    for _ in range(30):  # under load, the old harness failed within 40 rounds
        busy = [psycopg.connect(server.url, autocommit=True) for _ in range(4)]
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        server.kill()
        for conn in busy:
            conn.close()
        assert not _exists(postmaster), f"the killed postmaster {postmaster} still exists"
        assert _processes_in(server.data) == [], "a process of the killed server lives on"
        server.crash(random.Random(0))  # kill (a no-op now) then start: it must come back
        with psycopg.connect(server.url, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
