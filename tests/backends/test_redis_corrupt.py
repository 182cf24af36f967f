"""Stored data that Redis holds but cannot give back as a message (deleted by hand,
overwritten with bytes that are not UTF-8) raises CorruptRecordError naming the
session and the depth, on both faces; never a shorter or altered history."""

from __future__ import annotations

import pytest

from memvault.backends.redis_ops import Layout
from memvault.checks.opener import Opener
from memvault.errors import CorruptRecordError
from memvault.messages import Message
from tests.support.redis import flushed, raw_client


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("damage", ["missing", "not-utf8"])
def test_damaged_message_names_session_and_depth(face: str, damage: str) -> None:
    url = flushed()
    store = Opener(url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append([Message.user(f"m{i}") for i in range(5)])
        msgs = Layout("memvault").keys("s")[1]
        client = raw_client(url)
        try:
            if damage == "missing":
                client.hdel(msgs, 2)  # node 2 holds depth 2
            else:
                client.hset(msgs, 2, b"\xff\xfe not UTF-8")
        finally:
            client.close()
        with pytest.raises(CorruptRecordError) as err:
            s.history()
        assert (err.value.session_id, err.value.depth) == ("s", 2)
        assert ("missing" if damage == "missing" else "UTF-8") in err.value.reason
        assert [m.content for m in s.history(last=3)] == ["m2", "m3", "m4"]
    finally:
        store.close()
