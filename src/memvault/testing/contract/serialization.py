"""Reading back exactly what was written, or CorruptRecordError (invariant 5)."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memvault.errors import CorruptRecordError
from memvault.messages import Message, ToolCall
from memvault.testing.contract.base import ContractBase

AWKWARD_TEXTS = [
    "plain",
    "NUL \x00 inside",
    "\u202eRTL override\u202c and \u200f mark",
    "emoji 👩‍💻🏳️‍🌈 and astral 𝄞",
    "中文, 日本語, 한국어",
    "quotes ' \" ` and \\ backslash",
    "line\nbreaks\r\n\ttabs",
    "{braces} [brackets] %s %(x)s $1 ${x}",
    "\ufeff BOM and \uffff noncharacter",
    "",
    " " * 1000,
]


class SerializationContract(ContractBase):
    def test_awkward_text_round_trips_exactly(self, store: Any) -> None:
        """Any valid Unicode (NUL, RTL marks, emoji) reads back exactly. Failing: the
        backend's column type or encoding mangles text."""
        s = store.session("s")
        sent = [Message.user(t) for t in AWKWARD_TEXTS]
        s.append(sent)
        assert s.history() == sent

    def test_every_field_round_trips(self, store: Any) -> None:
        """ids, roles, names, tool calls (arguments kept as emitted), list content,
        metadata and created_at come back equal.
        Failing: the backend re-encodes bodies (e.g. a JSON column normalising numbers
        or key order) instead of storing the text as given.
        """
        s = store.session("s")
        when = datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=8)))
        sent = [
            Message.system("be brief", id="sys-1", created_at=when),
            Message.developer("dev note", name="ops"),
            Message.user(
                [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
                name="wang",
            ),
            Message.assistant(
                None,
                tool_calls=[
                    ToolCall(id="call_1", name="search", arguments='{"q": "x",  "n":1.50}'),
                    ToolCall(id="call_2", name="bad", arguments="{not json"),
                ],
            ),
            Message.tool("result \x00", tool_call_id="call_1"),
            Message.assistant(
                "done",
                metadata={
                    "model": "m",
                    "usage": {"in": 3, "out": 1.5},
                    "tags": ["a", None, True],
                    "big": 2**62,
                },
            ),
        ]
        s.append(sent)
        back = s.history()
        assert back == sent
        assert (
            back[0].created_at == when
            and back[3].tool_calls[0].arguments == '{"q": "x",  "n":1.50}'
        )

    def test_popped_message_comes_back_exactly(self, store: Any) -> None:
        """pop returns the message as it was written.
        Failing: pop returns a different node than the head, or re-encodes it.
        """
        s = store.session("s")
        m = Message.user("é\x00👍", metadata={"k": [1, 2]})
        s.append([m])
        assert s.pop() == m

    def test_corrupt_record_raises_naming_session_and_depth(self, store: Any) -> None:
        """A stored body that is not a valid envelope raises CorruptRecordError naming
        the session and depth, never a shorter history. Failing: the pickle/format
        drift bug, where a history silently came back empty."""
        self.require("corrupt")
        s = store.session("victim")
        s.append([Message.user("a"), Message.user("b"), Message.user("c")])
        for bad in ['{"v": 99, "m": {}}', "not json", "[]", pickle.dumps([]).decode("latin-1")]:
            self.corrupt(store, "victim", 2, bad)
            with pytest.raises(CorruptRecordError) as err:
                s.history()
            assert err.value.session_id == "victim" and err.value.depth == 2
            assert "victim" in str(err.value)
        assert len(s.history(last=1)) == 1

    def test_a_record_damaged_after_reads_is_loud(self, store: Any) -> None:
        """A record read many times, then damaged, raises CorruptRecordError at the
        next read. Failing: reads trust what an earlier read decoded instead of what
        is stored now."""
        self.require("corrupt")
        s = store.session("victim")
        s.append([Message.user("a"), Message.user("b", metadata={"n": 1})])
        for _ in range(3):
            assert [m.content for m in s.history(last=2)] == ["a", "b"]
        good = s.history()[1].model_dump_json()
        self.corrupt(store, "victim", 2, '{"v":1,"m":' + good.replace('"b"', '"b",') + "}")
        with pytest.raises(CorruptRecordError):
            s.history(last=2)

    def test_a_read_message_is_the_readers_own(self, store: Any) -> None:
        """Changing the metadata or content parts of a message read (a Message is
        frozen, its dicts and lists are not) changes nothing another read returns.
        Failing: reads hand out one shared object for the same stored record."""
        s = store.session("s")
        sent = [
            Message.user("flat", metadata={"k": "v"}),
            Message.user([{"type": "text", "text": "part"}], metadata={"k": [1]}),
        ]
        s.append(sent)
        first = s.history()
        first[0].metadata["k"] = "changed"
        first[1].metadata["k"].append(2)
        assert isinstance(first[1].content, list)
        first[1].content[0]["text"] = "changed"
        assert s.history() == sent and s.history(last=2) == sent
