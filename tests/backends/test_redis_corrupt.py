"""Stored data that Redis holds but cannot give back as a message (deleted by hand,
overwritten with bytes that are not UTF-8) raises CorruptRecordError naming the
session and the depth, on both faces; never a shorter or altered history."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.backends.redis.ops import READ, Eval, Layout
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


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize(("node", "depth"), [(5, 2), (3, 3), (4, 4)])
def test_damage_behind_a_summary_names_its_depth(face: str, node: int, depth: int) -> None:
    """The history script sends the depth of its first message only (the others follow
    one level apart); with a summary in front, the summary's depth is its through. A
    message deleted by hand is named at its own depth in the context view, in the
    full view and at an earlier version; the view around it still reads."""
    url = flushed()
    store = Opener(url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append([Message.user(f"m{i}", id=f"m{i}") for i in range(4)])
        s.summarize(Message.system("sum"), through="m1")  # node 5, through depth 2
        client = raw_client(url)
        try:
            client.hdel(Layout("memvault").keys("s")[1], node)
        finally:
            client.close()
        reads = [lambda: s.history(), lambda: s.history(last=3)]
        if node != 5:  # the summary is in neither of these
            reads += [lambda: s.history(full=True), lambda: s.history(at_version=1)]
        for read in reads:
            with pytest.raises(CorruptRecordError) as err:
                read()
            assert (err.value.session_id, err.value.depth) == ("s", depth)
        if node != 4:
            assert [m.content for m in s.history(last=1)] == ["m3"]
    finally:
        store.close()


# Well-formed UTF-8 at each boundary of RFC 3629, and bytes Python refuses to decode
# (overlong, a surrogate, beyond U+10FFFF, truncated, a stray continuation byte).
_TEXT = ["\u0080\u07ff", "\u0800\ud7ff\ue000\uffff", "\U00010000\U0010ffff"]
_NOT_TEXT = [
    b"\xc0\x80",
    b"\xc2",
    b"\xe0\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf0\x8f\xbf\xbf",
    b"\xe2\x82",
    b"\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc3\xa9\xe2\x82\xac\xff",
]


@pytest.mark.parametrize("content", [t.encode() for t in _TEXT] + _NOT_TEXT)
def test_pop_checks_utf8_before_it_commits(content: bytes) -> None:
    """pop agrees with Python's decoder at every RFC 3629 boundary: a body that decodes
    is popped; one that does not raises CorruptRecordError and stays (it was decoded
    before the script that pops it ran)."""
    url = flushed()
    store = Opener(url, "sync")()
    try:
        s = store.session("s")
        s.append([Message.user("a"), Message.user("b")])
        client = raw_client(url)
        try:
            client.hset(
                Layout("memvault").keys("s")[1],
                2,
                b'{"v":1,"m":{"role":"user","content":"%s"}}' % content,
            )
        finally:
            client.close()
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            with pytest.raises(CorruptRecordError, match="not UTF-8"):
                s.pop()
            assert (s.info().version, s.info().length) == (1, 2)
        else:
            assert s.pop().content == text
            assert (s.info().version, s.info().length) == (2, 1)
    finally:
        store.close()


@pytest.mark.parametrize("race", ["deleted", "emptied"])
def test_a_pop_whose_session_went_after_its_read_pops_nothing(
    monkeypatch: pytest.MonkeyPatch, race: str
) -> None:
    """pop reads its message, then pops it: a session deleted in between, or emptied
    by another client's pop, makes the pop return None (the script answers false),
    never a driver error, and pops nothing more. Failing: the pop script answered
    true for a session that is gone, or (`shows_summary` false answered true) for one
    left with no message and no summary."""
    url = flushed()
    store = Opener(url, "sync")()
    other = Opener(url, "sync")()
    client = raw_client(url)
    try:
        s = store.session("s")
        s.append([Message.user("a", id="a")])
        send = store.backend._send

        def spy(request: Any) -> Any:
            reply = send(request)
            if isinstance(request, Eval) and request.script is READ:
                if race == "deleted":
                    client.delete(*Layout("memvault").keys("s"))
                else:
                    popped = other.session("s").pop()
                    assert popped is not None and (popped.id, popped.content) == ("a", "a")
            return reply

        monkeypatch.setattr(store.backend, "_send", spy)
        assert s.pop() is None
        monkeypatch.undo()
        if race == "emptied":
            assert (s.info().version, s.info().length) == (2, 0)
            assert [e.op for e in s.log()] == ["append", "pop"]
    finally:
        client.close()
        other.close()
        store.close()


@pytest.mark.parametrize("face", ["sync", "async"])
@pytest.mark.parametrize("damage", ["message", "link"])
def test_fork_of_a_damaged_summary_names_its_through(face: str, damage: str) -> None:
    """A summary record deleted by hand (its message, or its link) makes fork raise
    CorruptRecordError at the summary's `through` and write no new session. Failing:
    fork's check `not id or not message` made `and` (it copied a summary with no
    message or no id)."""
    url = flushed()
    store = Opener(url, face)()  # type: ignore[arg-type]
    try:
        s = store.session("s")
        s.append([Message.user(f"m{i}", id=f"m{i}") for i in range(4)])
        s.summarize(Message.system("sum"), through="m1")
        keys = Layout("memvault").keys("s")
        client = raw_client(url)
        try:
            # nodes 1-4 hold the messages, node 5 the summary
            client.hdel(keys[1] if damage == "message" else keys[2], 5)
        finally:
            client.close()
        with pytest.raises(CorruptRecordError) as err:
            s.fork("t")
        assert (err.value.session_id, err.value.depth) == ("s", 2)
        assert "missing" in err.value.reason
        assert store.session("t").info() is None
    finally:
        store.close()
