"""Damaged data is loud (invariant 5): a read returns exactly what was written or
raises CorruptRecordError naming the session; never a shorter, repeated or altered
history, and a write that meets damage changes nothing.

The damage is done by the test class's :meth:`CorruptionContract.damage` (and
:meth:`~memvault.testing.contract.base.ContractBase.corrupt`), reaching into the
backend's own storage; the ``corrupt`` capability says it does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memvault.errors import CorruptRecordError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, texts, users

CHAIN_DAMAGE = ("missing", "self-parent")
"""How :meth:`CorruptionContract.damage` may break a chain: the node at the depth is
deleted, or made its own parent."""


def _loud(
    session_id: str, call: Callable[[], Any], expected: Any, depth: int | None = None
) -> bool:
    """``call()`` returns ``expected`` (True) or raises CorruptRecordError naming the
    session, and ``depth`` if given (False); anything else fails the test."""
    try:
        got = call()
    except CorruptRecordError as exc:
        assert exc.session_id == session_id, exc
        assert depth is None or exc.depth == depth, exc
        return False
    assert got == expected
    return True


def _pop_refused(s: Any, session_id: str, depth: int, length: int) -> None:
    """Pop, twice, raises CorruptRecordError naming ``depth`` and writes nothing: the
    session keeps version 1 and ``length``, and its log only the append."""
    for _ in range(2):
        with pytest.raises(CorruptRecordError) as err:
            s.pop()
        assert (err.value.session_id, err.value.depth) == (session_id, depth)
    assert (s.info().version, s.info().length) == (1, length)
    assert [e.op for e in s.log()] == ["append"]


class CorruptionContract(ContractBase):
    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        """Damage the stored session: ``kind`` is one of :data:`CHAIN_DAMAGE` (the node
        at ``depth`` of the visible chain), ``"summary"`` (the newest node at ``depth``,
        a summary taken through the message there, is deleted), ``"event"`` (the
        newest event's detail becomes text that is not JSON), ``"snapshot"`` (the
        record of the session's first snapshot becomes unreadable),
        ``"snapshot-length"`` (its length becomes -7), ``"snapshot-head"`` (its
        head becomes node 999, beyond the session's nodes), ``"snapshot-head-next"``
        (its head becomes the session's next node id, the first not yet given),
        ``"snapshot-head-below-0"`` or ``"snapshot-base-below-0"`` (its head, or its
        base, becomes -1). Override it with
        the ``corrupt`` capability; skip for a kind the backend cannot hold damaged
        (e.g. records kept as objects).
        """
        pytest.skip("the test class does not implement damage()")

    @pytest.mark.parametrize("kind", CHAIN_DAMAGE)
    def test_broken_chain_is_loud(self, store: Any, kind: str) -> None:
        """A chain missing a node, or with a node that is its own parent: history
        (both views), fork and pop give exactly what was written or raise
        CorruptRecordError naming the depth where the chain breaks, the same on every
        backend: the first depth, from the head down, whose node the links do not
        reach (the missing node's own depth; for a node that is its own parent, the
        depth below it); a failed write changes nothing. Failing: SQLite and
        PostgreSQL returned a shorter history (5 messages, 2 returned), SQLite looped
        for ever on a node that is its own parent and PostgreSQL returned the head 5
        times; fork copied the truncated history; pop raised a raw TypeError; mutants
        of PostgreSQL's ``_chain`` naming another depth, and of ``full_history``
        counting another session's node as this one's (so a range read returned 4 of
        the 5), survived the suite.
        """
        self.require("corrupt")
        sent = users(5)
        s = store.session("victim")
        s.append(sent)
        store.session("bystander").append(users(1, "b"))  # its node counts for nothing
        self.damage(store, "victim", 3, kind)
        broken = 3 if kind == "missing" else 2
        loud = not _loud("victim", s.history, sent, broken)
        loud = not _loud("victim", lambda: s.history(full=True), sent, broken) or loud
        assert _loud("victim", lambda: s.history(last=2), sent[3:])
        assert s.info().length == 5
        if not _loud("victim", lambda: s.fork("copy").history(), sent, broken):
            loud = True
            assert store.session("copy").info() is None
            assert store.sessions() == ["bystander", "victim"]
        for i in reversed(range(5)):
            version = s.info().version
            if not _loud("victim", s.pop, sent[i], broken):
                loud = True
                assert s.info().version == version  # the failed pop committed nothing
                break
        assert loud, "the damage went unnoticed by every read"

    @pytest.mark.parametrize("kind", CHAIN_DAMAGE)
    def test_compact_refuses_a_broken_chain(self, store: Any, kind: str) -> None:
        """compact over a session whose chain is broken raises CorruptRecordError
        naming it and the depth where the chain breaks, and deletes none of its
        messages: what lies below the break may still be wanted. A repeated compact
        refuses again; the full view, read before, is exact or as loud. Failing:
        PostgreSQL and Redis treated the nodes below the break as garbage and deleted
        them; a mutant of PostgreSQL's full_history taking the popped node's id for the
        missing one's (``next_node - 1 <> depth``) read a range with a hole, and survived.
        """
        self.require("corrupt")
        sent = users(5)
        s = store.session("victim")
        s.append(sent)
        s.pop()  # some real garbage beside the damage
        self.damage(store, "victim", 2, kind)
        broken = 2 if kind == "missing" else 1  # as test_broken_chain_is_loud says
        _loud("victim", lambda: s.history(full=True), sent[:4], broken)
        for _ in range(2):
            with pytest.raises(CorruptRecordError) as err:
                store.compact()
            assert (err.value.session_id, err.value.depth) == ("victim", broken)
        assert s.history(last=2) == sent[2:4]
        assert s.info().length == 4

    def test_search_below_a_missing_node_is_loud(self, store: Any) -> None:
        """A search whose only hit lies below a missing node (on a chain pops and
        appends made non-linear, so its position needs a walk) raises
        CorruptRecordError naming the session and the depth of the missing node.
        Failing: memory and SQLite took the hit for a hidden message and left it out;
        PostgreSQL raised a raw "broken chain" BackendError, and a mutant naming
        another depth survived the suite.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append([Message.user("kiwi"), *users(4)])
        s.pop()
        s.pop()
        s.append(users(2, "n"))
        self.damage(store, "victim", 2, "missing")
        for search in (s.search, store.search):
            with pytest.raises(CorruptRecordError) as err:
                search("kiwi")
            assert (err.value.session_id, err.value.depth) == ("victim", 2)

    def test_a_version_whose_head_is_missing_is_corrupt(self, store: Any) -> None:
        """``history(at_version=N)`` of a version whose event is still in the log but
        whose head node is gone raises CorruptRecordError naming the session, sync
        and async alike: compact never deletes what a kept event reaches, so this is
        damage, not a dropped version. Failing: every backend raised
        VersionNotFoundError saying ``compact(keep_events=...)`` had dropped it."""
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(3))
        s.append(users(2, "x"))
        self.damage(store, "victim", 5, "missing")
        with pytest.raises(CorruptRecordError) as err:
            s.history(at_version=2)
        assert err.value.session_id == "victim"
        assert "version 2" in err.value.reason
        assert texts(s.history(at_version=1)) == ["m0", "m1", "m2"]

    def test_missing_head_leaves_pop_undone(self, store: Any) -> None:
        """pop of a head whose node is gone raises CorruptRecordError and changes
        nothing. Failing: pop committed (version bumped) before failing, or raised a
        driver error.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(3))
        self.damage(store, "victim", 3, "missing")
        with pytest.raises(CorruptRecordError) as err:
            s.pop()
        assert (err.value.session_id, err.value.depth) == ("victim", 3)
        assert (s.info().version, s.info().length) == (1, 3)
        assert [e.op for e in s.log()] == ["append"]

    @pytest.mark.parametrize("kind", CHAIN_DAMAGE)
    def test_pop_onto_a_broken_link_leaves_pop_undone(self, store: Any, kind: str) -> None:
        """pop of a message whose link down is broken (the node below it missing, or
        the message made its own parent) raises CorruptRecordError naming the depth
        below it and changes nothing, however often it is tried: the new head must
        sit one level lower. Failing: pop never checked the new head; on Redis it
        popped a head that was its own parent, and history then returned
        m1..m4 as ['m2', 'm3', 'm4', 'm5'] with no error; SQLite and PostgreSQL
        committed the pop, and every later read raised.
        """
        self.require("corrupt")
        sent = users(5)
        s = store.session("victim")
        s.append(sent)
        self.damage(store, "victim", 5 if kind == "self-parent" else 4, kind)
        _pop_refused(s, "victim", 4, 5)
        _loud("victim", s.history, sent, 4)

    def test_pop_over_a_missing_earlier_summary_is_loud(self, store: Any) -> None:
        """pop undoing a summary whose earlier summary is gone raises
        CorruptRecordError naming the session and the undone summary's depth, and
        changes nothing, however often it is tried. Failing: memory and SQLite named
        depth 0; a PostgreSQL mutant without the check committed the pop, leaving the
        session a summary pointer to nothing (it survived the suite).
        """
        self.require("corrupt")
        s = store.session("victim")
        msgs = users(4)
        s.append(msgs)
        s.summarize(Message.system("S1"), through=msgs[0].id)
        s.summarize(Message.system("S2"), through=msgs[2].id)
        assert s.pop() == msgs[3]
        self.damage(store, "victim", 1, "summary")  # S1
        version = s.info().version
        for _ in range(2):
            with pytest.raises(CorruptRecordError) as err:
                s.pop()
            assert (err.value.session_id, err.value.depth) == ("victim", 3)
        assert (s.info().version, s.info().length, s.info().summarized) == (version, 1, 3)
        assert [e.op for e in s.log()][-1] == "pop"  # only the pop of m3
        assert [m.content for m in s.history()] == ["S2"]

    def test_search_over_a_missing_summary_is_loud(self, store: Any) -> None:
        """search, of the session and of the store, over a session whose summary is
        gone raises CorruptRecordError naming the session and the summary's depth,
        however often it is tried: never hits as if the summary were not there.
        Failing: PostgreSQL's search walked on past a summary that was not stored (its
        RAISE deleted; a mutant survived the suite).
        """
        self.require("corrupt")
        s = store.session("victim")
        msgs = [Message.user(f"kiwi {i}") for i in range(4)]
        s.append(msgs)
        s.summarize(Message.system("S1"), through=msgs[1].id)
        self.damage(store, "victim", 2, "summary")  # S1
        calls: list[Callable[[], Any]] = [lambda: s.search("kiwi"), lambda: store.search("kiwi")]
        for call in calls * 2:
            with pytest.raises(CorruptRecordError) as err:
                call()
            assert (err.value.session_id, err.value.depth) == ("victim", 2)

    @pytest.mark.parametrize("at", [None, "here"])
    def test_fork_of_a_missing_summary_makes_no_copy(self, store: Any, at: str | None) -> None:
        """fork (of the history, or at a snapshot) of a session whose summary is gone
        raises CorruptRecordError naming the session and the summary's depth, and
        makes no copy, however often it is tried: the new id stays free. Failing:
        memory stored the new session and its messages before it found the summary
        missing, so the copy was left half made and a retry raised ConflictError.
        """
        self.require("corrupt")
        s = store.session("victim")
        msgs = users(4)
        s.append(msgs)
        s.summarize(Message.system("S1"), through=msgs[1].id)
        s.snapshot("here")
        self.damage(store, "victim", 2, "summary")  # S1
        for _ in range(2):
            with pytest.raises(CorruptRecordError) as err:
                s.fork("copy", at=at)
            assert (err.value.session_id, err.value.depth) == ("victim", 2)
        assert store.session("copy").info() is None
        assert store.sessions() == ["victim"]

    @pytest.mark.parametrize(
        "body",
        [
            "not json",
            "42",
            '{"v": 99, "m": {}}',
            "[]",
            '{"v": 1, "m": "text"}',
            b'{"v":1,"m":{"role":"user","content":"\xff\xfe not UTF-8"}}',
            '{"v":1,"m":{"role":"user","content":"hi"},"x":0}',
            '{"v":1,"m":{"role":"user","content":"hi","x":0}}',
            '{"v":1,"m":{"role":"wizard","content":"hi"}}',
            '{"v":1,"m":{"role":"user","content":42}}',
            '{"v":1,"m":{"role":"user","content":"hi","created_at":"yesterday"}}',
        ],
        ids=[
            "not-json",
            "json-number",
            "version-99",
            "not-an-object",
            "m-not-an-object",
            "not-utf8",
            "extra-envelope-key",
            "extra-message-key",
            "bad-role",
            "bad-content",
            "bad-time",
        ],
    )
    def test_undecodable_head_leaves_pop_undone(self, store: Any, body: str | bytes) -> None:
        """pop of a message that cannot be decoded (not JSON, not an envelope, an
        unknown format version; an envelope whose bytes are not UTF-8; an envelope
        the server's own checks pass but that is not a valid message: an extra key, a
        bad field) raises CorruptRecordError naming it and changes nothing.
        Failing: pop committed before decoding, so a retry popped a second message;
        on Redis a body that is not UTF-8 was popped, then the reply raised; on Redis
        and PostgreSQL an extra key or a bad field passed the script's checks.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(2))
        self.corrupt(store, "victim", 2, body)
        _pop_refused(s, "victim", 2, 2)

    @pytest.mark.parametrize(
        ("kind", "read", "named"), [("event", "log", "event"), ("snapshot", "snapshots", "'here'")]
    )
    def test_damaged_record_is_loud(self, store: Any, kind: str, read: str, named: str) -> None:
        """An event whose detail, or a snapshot whose record, cannot be decoded: log()
        or snapshots() raises CorruptRecordError naming the session and the record.
        Failing: a raw JSONDecodeError/TypeError.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append([Message.user("a")])
        s.snapshot("here")
        self.damage(store, "victim", 1, kind)
        with pytest.raises(CorruptRecordError, match=named) as err:
            getattr(s, read)()
        assert err.value.session_id == "victim"

    @pytest.mark.parametrize(
        "kind",
        [
            "snapshot",
            "snapshot-length",
            "snapshot-head",
            "snapshot-head-next",
            "snapshot-head-below-0",
            "snapshot-base-below-0",
        ],
    )
    def test_a_damaged_snapshot_is_loud_everywhere(self, store: Any, kind: str) -> None:
        """A snapshot whose record cannot be decoded, or whose pointers cannot be right
        (a length, head or base below 0; a head beyond the session's nodes, by one
        or by far): snapshots(),
        rollback and fork(at=) raise CorruptRecordError naming the session and the
        snapshot, and write nothing (rollback and fork may go through where the
        damage is only in a field they do not read, the time SQLite and PostgreSQL
        keep apart). Failing: on Redis rollback and fork of a record that is not JSON
        raised a raw BackendError; a length of -7 was listed by snapshots(), and
        rollback to it left PostgreSQL a session of length -7 with an empty history;
        mutants of check_snapshot not checking the head or the base for a
        value below 0, or taking a head equal to the next node id for a stored
        one, survived the suite.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(3))
        s.snapshot("here")
        s.append(users(1, "x"))
        self.damage(store, "victim", 1, kind)
        with pytest.raises(CorruptRecordError, match="'here'") as err:
            s.snapshots()
        assert err.value.session_id == "victim"
        calls: list[Callable[[], Any]] = [
            lambda: s.fork("copy", at="here"),
            lambda: s.rollback("here"),
        ]
        for call in calls:
            try:
                call()
            except CorruptRecordError as exc:
                assert exc.session_id == "victim" and "'here'" in str(exc), exc
                assert store.sessions() == ["victim"]
                assert (s.info().version, [e.op for e in s.log()]) == (
                    2,
                    ["append", "snapshot", "append"],
                )
                assert texts(s.history()) == ["m0", "m1", "m2", "x0"]
            else:
                assert kind == "snapshot", "a damaged snapshot went unnoticed"

    @pytest.mark.parametrize(
        "kind",
        [
            "event",
            "snapshot",
            "snapshot-length",
            "snapshot-head",
            "snapshot-head-next",
            "snapshot-head-below-0",
            "snapshot-base-below-0",
        ],
    )
    def test_compact_over_a_damaged_record_is_loud_or_exact(self, store: Any, kind: str) -> None:
        """compact over a session whose newest event or first snapshot is damaged
        refuses, again when repeated, with CorruptRecordError naming the session and
        the record exactly, and drops nothing (the events it would have dropped are all
        still there). A snapshot whose pointers cannot be right (as
        test_a_damaged_snapshot_is_loud_everywhere damages them) is refused on every
        backend: what it should reach is unknown. Where the damage is in what
        compact does not read (an event's detail, a snapshot's time), it may instead
        compact as if the record were whole. Failing: on Redis compact of a snapshot
        record, or of a kept event, that is not JSON raised a raw BackendError (the
        script's decode failed); memory, SQLite and PostgreSQL compacted straight
        through a snapshot whose pointers cannot be right (a head at node 999, a
        length of -7...), where Redis refused (PostgreSQL named a broken chain for a
        base below 0). Redis once named the event by a wrong position in its log
        (a mutant survived).
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(3))
        s.snapshot("here")
        s.append(users(1, "x"))
        s.pop()  # x0: garbage once the events are dropped
        self.damage(store, "victim", 1, kind)
        # the pop's event, the log's 4th: Redis numbers it in the log, SQL by version
        named = ("event 4 ", "event of version 3 ") if kind == "event" else ("'here'",)
        outcomes: list[object] = []
        for keep in (None, 0, 0):  # all events kept (the pop's reaches x0), then none
            try:
                stats = store.compact(keep_events=keep)
            except CorruptRecordError as exc:
                assert exc.session_id == "victim", exc
                assert any(n in str(exc) for n in named), exc
                if kind != "event":
                    assert [e.op for e in s.log()] == ["append", "snapshot", "append", "pop"]
                outcomes.append("refused")
            else:
                outcomes.append((stats.nodes, stats.events))
        assert outcomes[0] in ("refused", (0, 0)), outcomes
        assert outcomes[1:] in (["refused", "refused"], [(1, 4), (0, 0)]), outcomes
        if kind.startswith("snapshot-"):
            assert outcomes == ["refused"] * 3, outcomes
        assert texts(s.history()) == texts(s.history(full=True)) == ["m0", "m1", "m2"]
        assert s.info().length == 3

    def test_deeply_nested_body_is_loud(self, store: Any) -> None:
        """A stored body nested 100,000 deep raises CorruptRecordError naming the
        session and depth. Failing: RecursionError from the JSON decoder.
        """
        self.require("corrupt")
        s = store.session("victim")
        s.append(users(2))
        self.corrupt(store, "victim", 2, '{"v":1,"m":' + "[" * 100_000 + "]" * 100_000 + "}")
        with pytest.raises(CorruptRecordError) as err:
            s.history()
        assert (err.value.session_id, err.value.depth) == ("victim", 2)
