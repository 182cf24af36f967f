"""Ordering, reads, pop/trim/clear, the event log, fork, delete, compact."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import ConflictError, SnapshotNotFoundError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, texts, users


class BasicsContract(ContractBase):
    def test_append_then_history_in_order(self, store: Any) -> None:
        """Appends come back oldest first, in order. Failing: the chain walk or the
        append's head update is wrong."""
        s = store.session("s")
        assert s.append(users(3)) == 1
        assert s.append(users(2, "n")) == 2
        assert texts(s.history()) == ["m0", "m1", "m2", "n0", "n1"]

    def test_history_last_reads_only_the_newest(self, store: Any) -> None:
        """``history(last=N)``: the newest N, oldest first; 0 gives []; N past the
        length gives all.
        Failing: the chain walk's limit or order is wrong.
        """
        s = store.session("s")
        s.append(users(5))
        assert texts(s.history(last=2)) == ["m3", "m4"]
        assert s.history(last=0) == []
        assert texts(s.history(last=99)) == ["m0", "m1", "m2", "m3", "m4"]

    def test_full_batches_round_trip(self, store: Any) -> None:
        """Two batches of the largest size (``max_batch``, 1,000 by default) come back
        whole and in order: history, history(last=) across the batches' edge, fork,
        and, after a pop and another append (the new node's id no longer follows its
        parent's), the same again. Failing: a backend that splits long argument lists
        (Redis's scripts send at most 500 field-value pairs a call) dropped or
        misaligned the messages after the first slice.
        """
        n = min(store.options.limits.max_batch, 1000)
        s = store.session("s")
        sent = users(n, "a") + users(n, "b")
        s.append(sent[:n])
        s.append(sent[n:])
        assert s.history() == sent and s.history(last=n + n // 2) == sent[n // 2 :]
        assert s.pop() == sent[-1]
        sent[-1:] = users(1, "c")
        s.append(sent[-1:])
        assert s.history(last=2 * n - 1) == sent[1:]
        assert s.fork("copy").history() == sent and s.info().length == 2 * n

    def test_a_long_session_forks_whole(self, store: Any) -> None:
        """A session of 16 full batches (16,000 messages by default) forks whole and
        in order. Failing: Redis's chain walk, which asks for the next node ids in
        growing windows (at most 500), asked for more than Lua's unpack() takes once
        the walk passed about 15,500 messages (a mutant survived the suite).
        """
        n = min(store.options.limits.max_batch, 1000)
        s = store.session("s")
        sent: list[str] = []
        for batch in range(16):
            messages = users(n, f"b{batch}-")
            s.append(messages)
            sent += [m.id for m in messages]
        assert [m.id for m in s.fork("copy").history()] == sent

    def test_missing_session_reads_empty(self, store: Any) -> None:
        """A session never written has no history, no info, no snapshots, no log;
        pop, trim and clear of it change nothing (version 0) and make no session.
        Failing: reads create the session or raise; PostgreSQL's trim made the
        session, or answered version 1 (mutants survived the suite).
        """
        s = store.session("nobody")
        assert s.history() == [] and s.info() is None
        assert s.snapshots() == [] and s.log() == [] and s.pop() is None
        assert (s.trim(keep_last=1), s.clear()) == (0, 0)
        assert s.info() is None and s.log() == []
        assert store.sessions() == []

    def test_info_tracks_version_and_length(self, store: Any) -> None:
        """``info()`` reports version and visible length after each change.
        Failing: version or length bookkeeping is off.
        """
        s = store.session("s")
        s.append(users(3))
        info = s.info()
        assert (info.session_id, info.version, info.length) == ("s", 1, 3)
        assert info.created_at <= info.updated_at and info.expires_at is None
        s.pop()
        assert (s.info().version, s.info().length) == (2, 2)

    def test_pop_returns_newest_and_logs(self, store: Any) -> None:
        """pop hides the newest message, returns it, bumps the version, logs 'pop'.
        Failing: pop moves the head wrongly or logs nothing.
        """
        s = store.session("s")
        s.append(users(2))
        popped = s.pop()
        assert popped is not None and popped.content == "m1"
        assert texts(s.history()) == ["m0"]
        assert s.log()[-1].op == "pop" and s.log()[-1].version == 2

    def test_noop_changes_keep_version_and_log_nothing(self, store: Any) -> None:
        """pop on empty, trim that keeps everything: no version bump, no event.
        Failing: a no-op writes an event or bumps the version.
        """
        s = store.session("s")
        s.append(users(2))
        s.clear()
        events, version = len(s.log()), s.info().version
        assert s.pop() is None
        assert s.trim(keep_last=5) == version
        assert s.clear() == version
        assert len(s.log()) == events and s.info().version == version

    def test_trim_and_clear_hide_and_log(self, store: Any) -> None:
        """trim keeps the newest N; clear hides all; both bump the version and log
        how many they hid; a snapshot between them stores the visible length.
        Failing: the base (trim floor) arithmetic or the log is wrong (PostgreSQL
        mutants of the logged count and the snapshot's length survived the suite).
        """
        s = store.session("s")
        s.append(users(5))
        assert s.trim(keep_last=2) == 2
        assert texts(s.history()) == ["m3", "m4"]
        assert s.snapshot("two").length == 2 and s.snapshots()[0].length == 2
        assert s.clear() == 3
        assert s.history() == [] and s.info().length == 0
        assert [e.op for e in s.log()] == ["append", "trim", "snapshot", "clear"]
        assert [s.log()[i].detail["hidden"] for i in (1, 3)] == [3, 2]

    def test_append_after_clear_and_pop_is_visible(self, store: Any) -> None:
        """Nodes appended after clear/pop are visible and chained correctly.
        Failing: new nodes are chained to a stale head or depth.
        """
        s = store.session("s")
        s.append(users(3))
        s.clear()
        s.append([Message.user("after-clear")])
        s.pop()
        s.append([Message.user("x"), Message.user("y")])
        assert texts(s.history()) == ["x", "y"]
        assert texts(s.history(last=1)) == ["y"]

    def test_every_hide_is_logged_with_its_writer(self, opener: Any) -> None:
        """Invariant 1: nothing disappears without an event naming the operation and
        the writer. Failing: an operation does not log, or drops the writer label."""
        store = opener(writer="agent-7")
        try:
            s = store.session("s")
            sent = users(4)
            s.append(sent)
            s.snapshot("cp")
            s.pop()
            s.trim(keep_last=1)
            s.rollback("cp")
            s.clear()
            log = s.log()
            assert [e.op for e in log] == ["append", "snapshot", "pop", "trim", "rollback", "clear"]
            assert {e.writer for e in log} == {"agent-7"}
            assert [e.version for e in log] == [1, 1, 2, 3, 4, 5]
            assert log[2].head_before != log[2].head_after
            assert [e.detail for e in log] == [
                {"messages": 4},
                {"name": "cp"},
                {"message_id": sent[3].id},
                {"hidden": 2},
                {"to": "cp", "saved": "auto:pre-rollback@v3"},
                {"hidden": 4},
            ]
        finally:
            store.close()

    def test_sessions_and_delete(self, store: Any) -> None:
        """delete removes a session's messages, snapshots and log; others stay.
        Failing: delete leaves data behind or touches another session.
        """
        a, b = store.session("a"), store.session("b")
        a.append(users(2))
        b.append(users(1))
        a.snapshot("x")
        assert store.sessions() == ["a", "b"]
        assert a.delete() is True and a.delete() is False
        assert store.sessions() == ["b"]
        assert a.history() == [] and a.snapshots() == [] and a.log() == []
        assert texts(b.history()) == ["m0"]
        a.append(users(1, "again"))
        assert a.info().version == 1

    def test_fork_current_and_at_snapshot(self, store: Any) -> None:
        """fork copies the current history, or a snapshot's; snapshots are not copied;
        the source is untouched.
        Failing: fork copies the wrong chain, copies snapshots, or shares state with the
        source.
        """
        s = store.session("s")
        s.append(users(2))
        s.snapshot("two")
        s.append(users(1, "x"))
        now = s.fork("now")
        then = s.fork("then", at="two")
        assert texts(now.history()) == ["m0", "m1", "x0"]
        assert texts(then.history()) == ["m0", "m1"]
        assert then.snapshots() == [] and then.log()[-1].op == "fork"
        then.append(users(1, "t"))
        assert texts(s.history()) == ["m0", "m1", "x0"]
        assert [m.id for m in now.history()] == [m.id for m in s.history()]
        s.trim(keep_last=1)  # a fork copies what is visible: the messages above base
        trimmed = s.fork("trimmed")
        assert texts(trimmed.history(full=True)) == ["x0"] and trimmed.info().length == 1

    def test_fork_refuses_existing_or_missing(self, store: Any) -> None:
        """fork onto an existing session: ConflictError; at a missing snapshot:
        SnapshotNotFoundError; neither writes anything.
        Failing: fork checks after writing, or overwrites a session.
        """
        s = store.session("s")
        s.append(users(1))
        store.session("t").append(users(1, "t"))
        with pytest.raises(ConflictError):
            s.fork("t")
        with pytest.raises(SnapshotNotFoundError):
            s.fork("u", at="nope")
        assert store.sessions() == ["s", "t"] and texts(store.session("t").history()) == ["t0"]

    def test_compact_keeps_everything_reachable(self, store: Any) -> None:
        """compact deletes only what no head, snapshot or kept event reaches: every
        history and snapshot reads the same afterwards, and garbage is gone; without
        keep_events it removes nothing here (every event is kept, and with it what it
        reaches). Failing: compact deletes reachable nodes or keeps garbage; check its
        reachability walk (Redis mutants that dropped one event without keep_events,
        none when exactly one was to go, lost an event's pointer, or a head above every
        snapshot, survived before the later events and appends here).
        """
        s = store.session("s")
        s.append(users(3))
        s.snapshot("cp")
        s.pop()
        s.pop()
        s.append(users(1, "n"))
        s.pop()  # n0 is now reachable only from the log
        s.snapshot("late")  # one more event after that pop
        before = (texts(s.history()), s.snapshots())
        events = len(s.log())
        stats = store.compact()
        assert (stats.nodes, stats.events, stats.sessions) == (0, 0, 0)
        assert len(s.log()) == events
        assert store.compact(keep_events=events).events == 0
        assert store.compact(keep_events=events - 1).events == 1  # exactly one to drop
        events -= 1
        stats = store.compact(keep_events=0)
        assert (stats.nodes, stats.events, stats.sessions) == (1, events, 0)
        assert s.log() == []
        assert (texts(s.history()), s.snapshots()) == before
        s.rollback("cp")
        assert texts(s.history()) == ["m0", "m1", "m2"]
        s.append(users(2, "z"))  # a head above every snapshot, no event kept
        store.compact(keep_events=0)
        assert texts(s.history()) == ["m0", "m1", "m2", "z0", "z1"]

    def test_compact_deletes_what_a_trim_hid_down_to_base(self, store: Any) -> None:
        """With no event kept, compact deletes exactly the messages a trim hid (the
        node at base too), keeps a branch a snapshot holds below a later trim's base,
        and a second compact finds nothing to delete and no broken chain (the node
        at base is gone). Failing: PostgreSQL's garbage walk kept the node at base,
        or wanted it as the parent of the lowest visible node (mutants survived).
        """
        s = store.session("s")
        s.append(users(6))
        s.trim(keep_last=3)  # base 3: m0..m2 hidden
        stats = store.compact(keep_events=0)
        assert (stats.nodes, stats.events) == (3, 2)
        assert (store.compact(keep_events=0).nodes, texts(s.history())) == (0, ["m3", "m4", "m5"])
        b = store.session("b")
        b.append(users(4, "b"))
        b.pop()
        b.append(users(2, "c"))  # b3 is off the chain now
        b.snapshot("old")  # holds b0..b2 c0 c1, from base 0
        b.trim(keep_last=1)  # base 4
        assert store.compact(keep_events=0).nodes == 1  # b3 alone
        assert store.compact(keep_events=0).nodes == 0
        b.rollback("old")
        assert texts(b.history()) == ["b0", "b1", "b2", "c0", "c1"]

    def test_compact_keeps_what_only_snapshots_hold(self, store: Any) -> None:
        """Three snapshots each hold messages nothing else reaches (cleared since);
        compact keeping one event keeps them all: a rollback to each gives its
        messages. Failing: compact's walk lost a snapshot's pointer while it read the
        kept events (a Redis mutant writing each event's pointer over an earlier one
        survived the suite).
        """
        s = store.session("s")
        for name in "abc":
            s.append(users(2, name))
            s.snapshot(name)
            s.clear()
        s.append(users(1, "z"))
        store.compact(keep_events=1)
        for name in "abc":
            s.rollback(name)
            assert texts(s.history()) == [f"{name}0", f"{name}1"]

    def test_compact_counts_only_what_it_removed(self, store: Any) -> None:
        """Sessions deleted while compact runs (here from its progress callback, after
        the first step) are not counted: the stats are exactly the first session's
        garbage. On the async face the callback calls the store as a sync caller of
        an async store does, waiting for the event loop. Failing: a step that found
        its session gone reported something removed (a Redis mutant answering 1
        instead of 0 survived the suite); on the async face of Redis and PostgreSQL
        the callback ran on the event loop's own thread, so waiting for the loop
        deadlocked.
        """
        for name in ("a", "b", "c"):
            s = store.session(name)
            s.append(users(3))
            s.pop()

        def delete_all(_: Any) -> None:
            for name in ("a", "b", "c"):
                store.session(name).delete()

        stats = store.compact(keep_events=0, batch=1, progress=delete_all)
        assert (stats.nodes, stats.events, stats.sessions) == (1, 2, 0)
        assert store.sessions() == []

    def test_compact_runs_in_steps_and_reports_progress(self, store: Any) -> None:
        """compact(batch=N) works through the sessions in steps of N, calling
        ``progress`` after each with the sessions done, the total and what it removed
        so far; the last report adds up to the returned stats. Failing: compact is
        one step over everything, or its reports skip, repeat or disagree.
        """
        for i in range(7):
            s = store.session(f"s{i}")
            s.append(users(2))
            s.pop()
        seen: list[Any] = []
        stats = store.compact(keep_events=0, batch=3, progress=seen.append)
        assert [(p.done, p.total) for p in seen] == [(3, 7), (6, 7), (7, 7)]
        assert [p.removed.nodes for p in seen] == [3, 6, 7]
        assert seen[-1].removed == stats and (stats.nodes, stats.sessions) == (7, 0)
        assert [texts(store.session(f"s{i}").history()) for i in range(7)] == [["m0"]] * 7
        with pytest.raises(ValueError, match="batch"):
            store.compact(batch=0)
