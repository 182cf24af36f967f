"""Summaries: ``summarize(summary, through=id)``, the context and full views."""

from __future__ import annotations

import re
from typing import Any

import pytest

from memvault.errors import ConflictError, DuplicateMessageError, InvalidMessageError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, texts, users


def _summarized(store: Any, n: int = 6, through: int = 2) -> tuple[Any, list[Message]]:
    """Session "s" with m0..m{n-1}, summarized by "S" through m{through}."""
    s = store.session("s")
    msgs = users(n)
    s.append(msgs)
    s.summarize(Message.system("S"), through=msgs[through].id)
    return s, msgs


class SummariesContract(ContractBase):
    def test_summary_is_the_context_view(self, store: Any) -> None:
        """history(): the summary, then the messages after its range; full=True: all
        of them with the summary after its ``through``; info counts both; the version
        bumps and the log records 'summarize'.
        Failing: the summary pointer is not stored or not read."""
        s, msgs = _summarized(store)
        assert texts(s.history()) == ["S", "m3", "m4", "m5"]
        assert texts(s.history(full=True)) == ["m0", "m1", "m2", "S", "m3", "m4", "m5"]
        info = s.info()
        assert (info.version, info.length, info.summarized) == (2, 4, 3)
        event = s.log()[-1]
        assert (event.op, event.version) == ("summarize", 2)
        assert event.detail == {
            "summary_id": s.history()[0].id,
            "through": msgs[2].id,
            "messages": 3,
        }

    def test_history_last_around_the_summary(self, store: Any) -> None:
        """history(last=N) counts the summary as the oldest message of the view; in
        the full view the summary is newer than the message it was taken through.
        Failing: last=N reads past the floor or drops the summary."""
        s, _ = _summarized(store)
        assert texts(s.history(last=2)) == ["m4", "m5"]
        assert texts(s.history(last=3)) == ["m3", "m4", "m5"]
        assert texts(s.history(last=4)) == ["S", "m3", "m4", "m5"]
        assert texts(s.history(last=9)) == ["S", "m3", "m4", "m5"]
        assert texts(s.history(last=3, full=True)) == ["m3", "m4", "m5"]
        assert texts(s.history(last=4, full=True)) == ["S", "m3", "m4", "m5"]
        assert texts(s.history(last=5, full=True)) == ["m2", "S", "m3", "m4", "m5"]

    def test_appends_after_through_stay_after_the_summary(self, store: Any) -> None:
        """Messages appended while the summary was being made are kept after it.
        Failing: summarize moves the head or drops what landed after ``through``."""
        s = store.session("s")
        msgs = users(3)
        s.append(msgs)
        seen = s.history()  # the summarizer reads ...
        s.append(users(2, "late"))  # ... another worker appends meanwhile
        s.summarize(Message.system("S"), through=seen[-1].id)
        assert texts(s.history()) == ["S", "late0", "late1"]

    def test_second_summary_covers_the_first(self, store: Any) -> None:
        """A newer summary replaces the older in the context view; the full view keeps
        both where they were taken; pop undoing the newer brings the older back.
        Failing: the summary chain is lost (Redis's pop refusing to undo a summary
        that has a previous one survived the suite)."""
        s, msgs = _summarized(store)
        s.summarize(Message.system("T"), through=msgs[4].id)
        assert texts(s.history()) == ["T", "m5"]
        assert texts(s.history(full=True)) == ["m0", "m1", "m2", "S", "m3", "m4", "T", "m5"]
        assert s.info().summarized == 5 and s.log()[-1].detail["messages"] == 2
        store.compact(keep_events=0)  # the older summary is still behind the newer
        s.pop()  # m5
        assert s.pop().content == "T"  # the newer summary, undone ...
        assert texts(s.history()) == ["S", "m3", "m4"]  # ... and the older one is back

    def test_summarize_compare_and_set(self, store: Any) -> None:
        """expect_version: ConflictError and nothing written when the session moved on.
        Failing: the version check is missing or runs after the write."""
        s = store.session("s")
        msgs = users(3)
        v = s.append(msgs)
        s.append(users(1, "x"))
        with pytest.raises(ConflictError):
            s.summarize(Message.system("S"), through=msgs[1].id, expect_version=v)
        assert s.info().version == 2 and s.info().summarized == 0
        assert s.summarize(Message.system("S"), through=msgs[1].id, expect_version=2) == 3
        with pytest.raises(ConflictError, match="at version 0"):  # a missing session
            store.session("nobody").summarize(Message.system("S"), through="x", expect_version=1)

    def test_bad_through_writes_nothing(self, store: Any) -> None:
        """An unknown, popped or already summarized ``through``, a summary on a
        missing session, with a stored id or at another version: the exact error,
        naming the session and the message, and nothing written.
        Failing: summarize checks after writing, or not at all, or names the wrong
        session or message."""

        def unknown(session: str, through: str) -> str:
            return (
                f"session {session!r} has no message {through!r} to summarize through; "
                "nothing was written"
            )

        with pytest.raises(InvalidMessageError, match=f"^{re.escape(unknown('nobody', 'nope'))}$"):
            store.session("nobody").summarize(Message.system("S"), through="nope")
        assert store.session("nobody").info() is None
        s, msgs = _summarized(store)
        s.pop()
        state = (s.info().version, texts(s.history(full=True)))
        refusals = {
            "nope": unknown("s", "nope"),
            "": "through must be a message id (a non-empty string), not ''",
            msgs[5].id: f"message {msgs[5].id!r} is not in the visible history of session "
            "'s' (popped, trimmed, cleared, rolled back or itself a summary); "
            "nothing was written",
            **{
                m.id: f"message {m.id!r} of session 's' is already summarized: a new summary "
                "must reach past the previous one; nothing was written"
                for m in msgs[1:3]
            },
        }
        for through, text in refusals.items():
            with pytest.raises(InvalidMessageError, match=f"^{re.escape(text)}$"):
                s.summarize(Message.system("X"), through=through)
        with pytest.raises(
            DuplicateMessageError,
            match=re.escape(
                f"session 's': 1 of 1 message ids are already stored (e.g. {msgs[0].id!r});"
                " nothing was written"
            ),
        ):
            s.summarize(msgs[0], through=msgs[4].id)
        with pytest.raises(
            ConflictError,
            match=re.escape(f"session 's' is at version {state[0]}, expected {state[0] + 5}"),
        ):
            s.summarize(Message.system("X"), through=msgs[4].id, expect_version=state[0] + 5)
        assert (s.info().version, texts(s.history(full=True))) == state

    def test_summary_through_a_trimmed_message_is_refused(self, store: Any) -> None:
        """A ``through`` that trim hid (still stored, still on the chain below base) is
        refused like a popped one, and nothing is written. Failing: only a through
        both below base and above the head was refused (Redis's check with ``or``
        made ``and`` survived), so a summary covered hidden messages.
        """
        s = store.session("s")
        msgs = users(4)
        s.append(msgs)
        s.trim(keep_last=2)
        version = s.info().version
        with pytest.raises(InvalidMessageError):
            s.summarize(Message.system("X"), through=msgs[1].id)
        assert s.info().version == version and texts(s.history()) == ["m2", "m3"]

    def test_compact_keeps_a_summary_only_a_snapshot_holds(self, store: Any) -> None:
        """A summary that pop undid, still held by a snapshot, survives compact (even
        with every event dropped): rolling back to the snapshot brings it back.
        Failing: compact kept only the summaries the session itself points at
        (Redis's snapshot summaries read as 0 survived the suite).
        """
        s = store.session("s")
        msgs = users(3)
        s.append(msgs)
        s.summarize(Message.system("S"), through=msgs[2].id)
        s.snapshot("cp")
        s.pop()  # nothing after the summary: pop undoes it
        assert texts(s.history()) == ["m0", "m1", "m2"]
        store.compact(keep_events=0)
        s.rollback("cp")
        assert texts(s.history()) == ["S"]
        assert texts(s.history(full=True)) == ["m0", "m1", "m2", "S"]

    def test_compact_keeps_the_summary_beside_every_snapshot_s(self, store: Any) -> None:
        """compact (every event dropped) keeps the session's summary and each
        snapshot's, whatever the snapshots hold (one no summary, one an older one),
        and deletes the garbage beside them. Failing: Redis's compact kept only the
        last snapshot's summary, written over the session's own; PostgreSQL's walk
        of the summaries' parents kept every node (mutants survived the suite).
        """
        s = store.session("s")
        msgs = users(4)
        s.append(msgs)
        s.snapshot("none")
        s.summarize(Message.system("S1"), through=msgs[0].id)
        s.snapshot("one")
        s.summarize(Message.system("S2"), through=msgs[2].id)
        s.append(users(1, "x"))
        s.pop()  # x0: garbage once the events go
        assert store.compact(keep_events=0).nodes == 1
        assert texts(s.history()) == ["S2", "m3"]
        s.rollback("one")
        assert texts(s.history()) == ["S1", "m1", "m2", "m3"]

    def test_summary_through_a_summary_is_refused(self, store: Any) -> None:
        """A summary is not on the chain: it cannot be summarized through.
        Failing: the chain check trusts the depth alone."""
        s, _ = _summarized(store)
        summary_id = s.history()[0].id
        with pytest.raises(InvalidMessageError):
            s.summarize(Message.system("X"), through=summary_id)

    def test_summarize_retry_is_a_no_op(self, store: Any) -> None:
        """Retrying the same summary (same id) returns the version, writes nothing.
        Failing: retries after a lost reply raise or double the summary."""
        s = store.session("s")
        msgs = users(3)
        s.append(msgs)
        summary = Message.system("S")
        v = s.summarize(summary, through=msgs[1].id)
        assert s.summarize(summary, through=msgs[1].id) == v
        assert s.append([summary]) == v  # a stored id: the append is a retry
        assert len(s.log()) == 2

    def test_rollback_undoes_and_restores_a_summary(self, store: Any) -> None:
        """A snapshot holds the summary pointer: rolling back to before the summary
        undoes it, rolling back the rollback brings it back.
        Failing: snapshots do not save the summary pointer."""
        s = store.session("s")
        msgs = users(4)
        s.append(msgs)
        s.snapshot("before")
        s.summarize(Message.system("S"), through=msgs[2].id)
        saved = s.rollback("before")
        assert texts(s.history()) == ["m0", "m1", "m2", "m3"] and s.info().summarized == 0
        assert (saved.summary != 0, saved.through) == (True, 3)
        s.rollback(saved.name)
        assert texts(s.history()) == ["S", "m3"] and s.info().summarized == 3

    def test_pop_trim_clear_with_a_summary(self, store: Any) -> None:
        """pop hides messages after the summary, then undoes the summary; a trim past
        ``through`` hides the summary with its range; clear hides everything.
        Failing: pop or trim ignore the summary pointer."""
        s, msgs = _summarized(store, n=4)
        assert s.pop().content == "m3"
        assert s.pop().content == "S"
        assert texts(s.history()) == ["m0", "m1", "m2"]
        assert s.log()[-1].detail["summary_id"] == s.log()[-3].detail["summary_id"]
        s.summarize(Message.system("S2"), through=msgs[1].id)
        s.trim(keep_last=2)
        assert texts(s.history()) == ["S2", "m2"] and s.info().summarized == 1
        s.trim(keep_last=1)
        assert texts(s.history()) == ["m2"] and s.info().summarized == 0
        assert texts(s.history(full=True)) == ["m2"]
        s.clear()
        assert s.history() == [] and s.pop() is None

    def test_pop_undoes_a_summary_of_a_summary(self, store: Any) -> None:
        """pop of a summary taken over an earlier one brings the earlier one back as
        the context view's start. Failing: undoing a summary whose predecessor is a
        summary breaks (Redis's script assigned a global and raised)."""
        s = store.session("s")
        msgs = users(4, "m")
        s.append(msgs)
        s.summarize(Message.system("S1"), through=msgs[0].id)
        s.summarize(Message.system("S2"), through=msgs[2].id)
        assert s.pop().content == "m3"
        assert s.pop().content == "S2"
        assert texts(s.history()) == ["S1", "m1", "m2"] and s.info().summarized == 1

    def test_fork_copies_the_context_summary(self, store: Any) -> None:
        """fork copies the full view and the summary the context view starts with, and
        no summary a trim hid. Failing: a forked session loses its summary or its
        originals, or gets a hidden summary back (a Redis mutant survived that way)."""
        s, _ = _summarized(store)
        s.snapshot("cp")
        s.append(users(1, "x"))
        f = s.fork("f", at="cp")
        assert texts(f.history()) == ["S", "m3", "m4", "m5"]
        assert texts(f.history(full=True)) == ["m0", "m1", "m2", "S", "m3", "m4", "m5"]
        assert f.info().summarized == 3
        f.append(users(1, "y"))  # after the copied summary's node: a PostgreSQL fork
        assert texts(f.history()) == ["S", "m3", "m4", "m5", "y0"]  # once reused its id
        s.trim(keep_last=1)  # hides the summary's range: a fork copies no summary
        assert texts(s.fork("g").history(full=True)) == ["x0"]

    def test_fork_of_a_trimmed_session_moves_its_summary_down(self, store: Any) -> None:
        """A fork starts at the source's base: its summary stands for the same visible
        messages, through a depth lower by the source's base. Failing: a mutant adding
        the base instead survived (every fork tested started at base 0)."""
        s = store.session("s")
        msgs = users(6)
        s.append(msgs)
        s.trim(keep_last=4)  # base 2
        s.summarize(Message.system("S"), through=msgs[3].id)
        f = s.fork("f")
        assert texts(f.history()) == ["S", "m4", "m5"]
        assert texts(f.history(full=True)) == ["m2", "m3", "S", "m4", "m5"]
        assert (f.info().length, f.info().summarized) == (3, 2)

    def test_a_trim_to_exactly_through_hides_the_summary(self, store: Any) -> None:
        """A trim to exactly the summary's last message (base = through) hides the
        summary: info counts only the messages after it; pop returns them and then
        None, never the hidden summary; a fork, of the session or of a snapshot taken
        then, copies no summary, not even hidden. Failing: PostgreSQL's pop and fork
        compared ``through >= base`` (mutants survived the suite).
        """
        s = store.session("s")
        msgs = users(5)
        s.append(msgs)
        s.summarize(Message.system("kiwi summary"), through=msgs[2].id)
        s.trim(keep_last=2)  # base 3: hides m0..m2, and with them the summary (through 3)
        assert texts(s.history()) == ["m3", "m4"]
        assert (s.info().length, s.info().summarized) == (2, 0)
        s.snapshot("cp")
        indexed = hasattr(store.backend, "search")
        for copy in (s.fork("f"), s.fork("g", at="cp")):
            assert texts(copy.history(full=True)) == ["m3", "m4"]
            assert copy.info().summarized == 0
            if indexed:  # not even stored hidden
                assert copy.search("kiwi", include_hidden=True) == []
        assert [s.pop().content, s.pop().content] == ["m4", "m3"]
        version = s.info().version
        assert s.pop() is None
        assert s.info().version == version and s.history(full=True) == []

    def test_a_trim_past_through_leaves_the_summary_out_of_info(self, store: Any) -> None:
        """A trim past the summary's last message (base > through) hides the summary:
        info counts only the messages left, summarizing none, as history shows them.
        Failing: PostgreSQL's info counted the hidden summary in the length and its
        range as ``through - base`` (-1) summarized (mutants survived the suite).
        """
        s, _ = _summarized(store)  # S through m2 (depth 3)
        s.trim(keep_last=2)  # base 4
        assert texts(s.history()) == ["m4", "m5"]
        assert texts(s.history(full=True)) == ["m4", "m5"]
        info = s.info()
        assert (info.version, info.length, info.summarized) == (3, 2, 0)

    def test_compact_keeps_summarized_originals(self, store: Any) -> None:
        """The originals under a summary are not garbage, and neither is the summary.
        Failing: compact walks the context view instead of the full one."""
        s, _ = _summarized(store)
        store.compact(keep_events=0)
        assert texts(s.history()) == ["S", "m3", "m4", "m5"]
        assert texts(s.history(full=True)) == ["m0", "m1", "m2", "S", "m3", "m4", "m5"]

    def test_compact_deletes_an_undone_summary_and_keeps_every_event(self, store: Any) -> None:
        """A summary pop undid is garbage even while every event is kept (the log
        records heads and bases, never summaries): compact deletes it, drops no event,
        and the session's search still tells a popped message from the chain.
        Failing: memory dropped one event of a session with fewer than keep_events
        (a mutant survived), and counted the deleted summary as still stored, taking
        the popped message for one of a linear chain (a mutant survived).
        """
        s = store.session("s")
        s.append([Message.user("alpha", id="a"), Message.user("beta", id="b")])
        s.summarize(Message.system("sigma", id="S"), through="b")
        s.pop()  # nothing after the summary: undone
        stats = store.compact(keep_events=10)
        assert (stats.sessions, stats.nodes, stats.events) == (0, 1, 0)
        assert [e.op for e in s.log()] == ["append", "summarize", "pop"]
        s.append([Message.user("gamma", id="c")])
        s.pop()
        s.append([Message.user("delta", id="d")])
        assert texts(s.history(full=True)) == ["alpha", "beta", "delta"]
        if hasattr(store.backend, "search"):  # a search index, which finds hidden ones
            assert s.search("gamma") == []
            assert [(h.message.id, h.position) for h in s.search("gamma", include_hidden=True)] == [
                ("c", None)
            ]
            assert [(h.message.id, h.position) for h in s.search("delta")] == [("d", 3)]
