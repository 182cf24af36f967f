"""After a PostgreSQL server restart, the connections the pool kept are dead: the
first call on one fails (it cannot know whether it was applied), and the next call
must work, as the documented retry loop expects, not fail again on the next dead
connection the pool hands out."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from memvault import BackendError, Message
from memvault.checks.opener import Opener
from memvault.torture.servers import PrivateServer, start_server


@pytest.fixture(scope="module")
def server() -> Iterator[PrivateServer]:
    private = start_server("postgres")
    try:
        yield private
    finally:
        private.close()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_one_failed_call_after_a_restart_then_it_works(server: PrivateServer, face: str) -> None:
    store = Opener(
        f"{server.url}?schema=restart_{face}",
        face,  # type: ignore[arg-type]
        {"min_size": 4, "max_size": 4},
    )()
    try:
        s = store.session("s")
        for i in range(8):
            s.append([Message.user(f"m{i}")])
        server.crash(random.Random(1))
        batch = [Message.user("after the restart")]
        with pytest.raises(BackendError):  # the connection it was sent on is dead
            s.append(batch)
        s.append(batch)  # the retry: a fresh connection, stored once
        assert [m.content for m in s.history()][-2:] == ["m7", "after the restart"]
    finally:
        store.close()
