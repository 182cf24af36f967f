"""Bad input is rejected before anything is written (invariant 6); hostile ids stay
isolated."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from memvault.errors import InvalidArgumentError, InvalidMessageError
from memvault.messages import Message, ToolCall
from memvault.model import Limits
from memvault.testing.contract.base import ContractBase, texts

WEIRD_IDS = [
    "'; DROP TABLE sessions; --",
    "quote \" and ' both",
    "{braces}",
    "}{",
    "{",
    "a{b}c",
    "slash/and\\back",
    "../../etc/passwd",
    "colon:star*?[glob]",
    "emoji 🙂 id",
    "line\nbreak",
    "tab\tspace ",
    "nul\x00id",
    "%s%d",
    "memvault:{s}:head",
    "x" * 512,
    "ß",
    "SS",
]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _unvalidated() -> list[Any]:
    """Messages that skipped pydantic's validation (model_copy(update=...) and
    model_construct), each one unreadable if stored."""
    m = Message.user("hi")
    updates: list[dict[str, Any]] = [
        {"role": "robot"},
        {"id": ""},
        {"id": "x" * 300},
        {"id": None},
        {"content": 42},
        {"tool_call_id": 7},
        {"metadata": {"\ud800": 1}},
        {"metadata": {"k": _nested(200)}},
        {"content": None},
        {"created_at": "yesterday"},
        {"content": [5]},
        {"name": 3},
        {"tool_calls": (ToolCall(id="c", name="f"),)},
        {"tool_calls": ("c",)},
    ]
    call = ToolCall(id="c", name="f").model_copy(update={"arguments": {"a": 1}})
    return [
        *(m.model_copy(update=u) for u in updates),
        Message.assistant(None, tool_calls=[ToolCall(id="c", name="f")]).model_copy(
            update={"tool_calls": (call,)}
        ),
        Message.model_construct(role="user", content="x", id=None),
        Message.model_construct(role="wizard", content="x"),
    ]


class InputsContract(ContractBase):
    @pytest.mark.parametrize("bad_id", ["", "x" * 513, None, 42, "lone \ud800"])
    def test_bad_session_ids_are_refused(self, store: Any, bad_id: Any) -> None:
        """Empty, over-long, non-string or unencodable ids: InvalidMessageError.
        Failing: the facade's id validation was bypassed or changed.
        """
        with pytest.raises(InvalidMessageError):
            store.session(bad_id)

    @pytest.mark.parametrize(
        "bad",
        [
            pytest.param([], id="empty-batch"),
            pytest.param([{"role": "wizard", "content": "x"}], id="unknown-role"),
            pytest.param([{"role": "user", "content": "x", "metadata": {"s": {1, 2}}}], id="set"),
            pytest.param([{"role": "user", "content": "x", "metadata": {"n": math.nan}}], id="nan"),
            pytest.param([{"role": "user", "content": "x", "metadata": {"b": b"x"}}], id="bytes"),
            pytest.param([{"role": "user", "content": "lone \ud83d surrogate"}], id="surrogate"),
            pytest.param([{"role": "user", "content": None}], id="none-content"),
            pytest.param([{"role": "user", "content": 5}], id="int-content"),
            pytest.param([{"role": "user", "content": "x", "extra": 1}], id="unknown-field"),
            pytest.param(["just a string"], id="not-a-message"),
            pytest.param(Message.user("not in a list"), id="bare-message"),
            pytest.param(
                [{"role": "user", "content": "x", "metadata": {"\ud800": 1}}], id="surrogate-key"
            ),
            pytest.param(
                [{"role": "user", "content": [{"type": "text", "\udfff": "x"}]}],
                id="surrogate-part-key",
            ),
            pytest.param(
                [{"role": "user", "content": "x", "metadata": {"k": _nested(1000)}}],
                id="metadata-1000-deep",
            ),
            pytest.param(
                [{"role": "user", "content": [{"k": _nested(101)}]}], id="content-101-deep"
            ),
            pytest.param((Message.user(str(i)) for i in range(2)), id="generator"),
        ],
    )
    def test_bad_messages_write_nothing(self, store: Any, bad: Any) -> None:
        """Every malformed batch raises InvalidMessageError; the session stays absent
        even when a valid message precedes the bad one.
        Failing: validation happens after the first write, or lets bad input through.
        """
        s = store.session("s")
        batch = [Message.user("fine"), *bad] if isinstance(bad, list) and bad else bad
        with pytest.raises(InvalidMessageError):
            s.append(batch)
        assert s.info() is None and store.sessions() == []

    @pytest.mark.parametrize("bad", _unvalidated())
    def test_unvalidated_message_objects_write_nothing(self, store: Any, bad: Message) -> None:
        """A Message made without validation is checked whole at append and refused:
        nothing is written, and the session stays readable. Failing: such a message was
        acknowledged, then every history() of the session raised CorruptRecordError
        (and pop() committed before raising).
        """
        s = store.session("s")
        s.append([Message.user("before")])
        with pytest.raises(InvalidMessageError):
            s.append([Message.user("fine"), bad])
        assert texts(s.history()) == ["before"] and s.info().version == 1
        assert texts([s.pop()]) == ["before"]

    def test_batch_byte_limit_writes_nothing(self, opener: Any) -> None:
        """A batch whose encoded messages add up past ``max_batch_bytes`` is refused,
        however small each message. Failing: only the count and each message's size
        were limited (PostgreSQL dropped the connection near 1 GB and memvault said
        OutcomeUnknownError, though nothing could ever be applied).
        """
        store = opener(limits=Limits(max_message_bytes=1000, max_batch_bytes=2000))
        try:
            s = store.session("s")
            with pytest.raises(InvalidMessageError, match="2000 bytes"):
                s.append([Message.user("x" * 700) for _ in range(3)])
            assert s.info() is None
            s.append([Message.user("x" * 700) for _ in range(2)])
            assert s.info().length == 2
        finally:
            store.close()

    def test_size_limits_write_nothing(self, opener: Any) -> None:
        """A message over the size limit or a batch over the count limit is refused.
        Failing: the limits are not enforced before I/O, or differ on this backend.
        """
        store = opener(limits=Limits(max_message_bytes=1000, max_batch=3))
        try:
            s = store.session("s")
            with pytest.raises(InvalidMessageError, match="limit"):
                s.append([Message.user("ok"), Message.user("x" * 1000)])
            with pytest.raises(InvalidMessageError, match="at most 3"):
                s.append([Message.user(str(i)) for i in range(4)])
            s.append([Message.user("y" * 800)])
            assert s.info().length == 1
        finally:
            store.close()

    def test_default_message_limit_is_4_mib(self, store: Any) -> None:
        """The default limit is 4 MiB encoded: just under is stored, over is refused.
        Failing: the backend truncates or refuses large bodies (column size, value
        limit).
        """
        s = store.session("s")
        with pytest.raises(InvalidMessageError):
            s.append([Message.user("x" * (4 * 1024 * 1024))])
        big = Message.user("é" * (2 * 1024 * 1024 - 200))
        s.append([big])
        assert s.history() == [big]

    @pytest.mark.parametrize("name", ["", "n" * 257, "auto:x", None])
    def test_bad_snapshot_names(self, store: Any, name: Any) -> None:
        """Empty, over-long, reserved or non-string snapshot names are refused.
        Failing: snapshot-name validation was bypassed.
        """
        s = store.session("s")
        s.append([Message.user("x")])
        with pytest.raises(InvalidMessageError):
            s.snapshot(name)
        assert s.snapshots() == []

    @pytest.mark.parametrize("value", [-1, 1.5, "3", True, 2**63])
    def test_bad_counts(self, store: Any, value: Any) -> None:
        """last, keep_last, expect_version and keep_events take ints from 0 to 2**63-1.
        Failing: an argument check was bypassed and reached the backend.
        """
        s = store.session("s")
        s.append([Message.user("x")])
        calls: list[Callable[[], object]] = [
            lambda: s.history(last=value),
            lambda: s.trim(keep_last=value),
            lambda: s.append([Message.user("y")], expect_version=value),
            lambda: store.compact(keep_events=value),
        ]
        for call in calls:
            with pytest.raises(InvalidArgumentError):
                call()
        assert s.info().version == 1

    def test_event_details_name_odd_ids_exactly(self, store: Any) -> None:
        """The event log names message ids, snapshots and sessions exactly, NUL
        characters, quotes, backslashes and non-ASCII included (a NUL first, inside
        and last): snapshot, pop, summarize, rollback and fork details. Failing:
        PostgreSQL builds these JSON strings around NUL bytes (text cannot hold them);
        a mutant that cut or kept one byte beside each NUL survived the suite.
        """
        odd = '\x00é"\x00\\x\x00'
        s = store.session("s" + odd)
        first, second = Message.user("a", id="a" + odd), Message.user("b", id="b" + odd)
        s.append([first, second])
        s.snapshot("cp" + odd)
        s.pop()
        s.summarize(Message.system("S", id="S" + odd), through=first.id)
        s.pop()
        s.rollback("cp" + odd)
        s.fork("copy", at="cp" + odd)
        assert [e.detail for e in s.log()[1:]] == [
            {"name": "cp" + odd},
            {"message_id": "b" + odd},
            {"messages": 1, "summary_id": "S" + odd, "through": "a" + odd},
            {"summary_id": "S" + odd},
            {"to": "cp" + odd, "saved": "auto:pre-rollback@v4"},
        ]
        assert store.session("copy").log()[0].detail == {"from": "s" + odd, "at": "cp" + odd}

    def test_weird_session_ids_stay_isolated(self, store: Any) -> None:
        """Hostile ids (SQL, key syntax, hash tags, globs, NUL) never touch another
        session's data. Failing: injection or key collision in the backend."""
        for i, sid in enumerate(WEIRD_IDS):
            s = store.session(sid)
            s.append([Message.user(f"msg {i}")])
            s.snapshot(f"snap {sid[:200]}")
        assert store.sessions() == sorted(WEIRD_IDS)
        for i, sid in enumerate(WEIRD_IDS):
            s = store.session(sid)
            assert texts(s.history()) == [f"msg {i}"]
            assert [x.name for x in s.snapshots()] == [f"snap {sid[:200]}"]
        store.session(WEIRD_IDS[0]).delete()
        assert len(store.sessions()) == len(WEIRD_IDS) - 1
        assert texts(store.session(WEIRD_IDS[1]).history()) == ["msg 1"]
