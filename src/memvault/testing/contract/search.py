"""Lexical search: ``session.search`` and ``store.search`` (BM25 over the full view)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from memvault.errors import InvalidArgumentError
from memvault.messages import Message
from memvault.testing.contract.base import ContractBase, users


class SearchContract(ContractBase):
    def test_search_ranks_visible_messages_and_summaries(self, store: Any) -> None:
        """The best matches come first with their full-view positions; summaries are
        found; popped messages are not; ``k`` caps the hits.
        Failing: search reads the context view, or hidden messages."""
        s = store.session("s")
        msgs = [
            Message.user("the cat sat"),
            Message.user("a dog barked"),
            Message.user("cat and cat again"),
            Message.user("nothing here"),
        ]
        s.append(msgs)
        s.summarize(Message.system("summary: a cat, a dog"), through=msgs[1].id)
        s.append([Message.user("hidden cat")])
        s.pop()
        hits = s.search("CAT")
        assert [h.message.content for h in hits][:1] == ["cat and cat again"]
        assert {h.message.content for h in hits} == {
            "the cat sat",
            "summary: a cat, a dog",
            "cat and cat again",
        }
        assert {(h.position, h.session_id) for h in hits} == {(1, "s"), (3, "s"), (4, "s")}
        assert all(a.score >= b.score > 0 for a, b in itertools.pairwise(hits))
        assert len(s.search("cat", k=1)) == 1 and s.search("zebra") == []

    def test_store_search_ranks_sessions_together(self, store: Any) -> None:
        """store.search ranks every live session's messages together, or only those
        of ``sessions``. Failing: results not merged, or the filter ignored."""
        store.session("a").append([Message.user("apple pie recipe")])
        store.session("b").append([Message.user("apple"), Message.user("pear")])
        assert {h.session_id for h in store.search("apple")} == {"a", "b"}
        assert [h.session_id for h in store.search("apple", sessions=["a"])] == ["a"]
        assert store.search("pie")[0].message.content == "apple pie recipe"

    def test_bad_queries_are_refused(self, store: Any) -> None:
        """A query with no word, a negative k or a lone string as sessions: an error
        before any read. Failing: the arguments are not checked."""
        store.session("s").append([Message.user("x")])
        calls: list[Callable[[], object]] = [
            lambda: store.session("s").search("  ?! "),
            lambda: store.session("s").search("x", k=-1),
            lambda: store.search("x", sessions="s"),
        ]
        for call in calls:
            with pytest.raises(InvalidArgumentError):
                call()

    def test_hits_are_the_full_view_after_pops_rollbacks_and_summaries(self, store: Any) -> None:
        """After pops, appends on top of them, a rollback, a trim and a summary, the
        hits (with a large k) are exactly the full view's messages holding a word of
        the query, at their full-view positions. Failing: an index that keeps hiding
        decisions of its own, or positions that ignore base or summaries."""
        s = store.session("s")
        s.append([Message.user(f"apple {i}") for i in range(6)])
        s.pop()
        s.pop()
        s.append([Message.user("apple after pop"), Message.user("pear")])
        s.snapshot("mid")
        s.append([Message.user("apple lost to the rollback")])
        s.rollback("mid")
        s.append([Message.user("apple again")])
        s.trim(keep_last=6)
        full = s.history(full=True)
        s.summarize(Message.system("apple summary"), through=full[2].id)
        full = s.history(full=True)
        expected = {(i, m.content) for i, m in enumerate(full, 1) if "apple" in str(m.content)}
        hits = s.search("apple", k=100)
        assert {(h.position, h.message.content) for h in hits} == expected
        assert not any(h.hidden for h in hits)
        for h in hits:
            assert full[h.position - 1] == h.message

    def test_include_hidden_finds_popped_trimmed_and_rolled_back(self, store: Any) -> None:
        """include_hidden=True also finds what pop, trim, rollback and an undone
        summary hid, marked hidden with no position; visible hits keep theirs.
        Failing: hidden messages lost from the index, or not marked."""
        if not hasattr(store.backend, "search"):
            pytest.skip("the backend has no search index (it scans the full view)")
        s = store.session("s")
        s.append(
            [Message.user("kiwi trimmed"), Message.user("kiwi kept"), Message.user("kiwi popped")]
        )
        s.pop()
        s.trim(keep_last=1)
        s.snapshot("before")
        s.append([Message.user("kiwi rolled back")])
        s.rollback("before")
        s.summarize(Message.system("kiwi summary undone"), through=s.history()[-1].id)
        s.pop()
        visible = s.search("kiwi")
        assert [(h.message.content, h.position, h.hidden) for h in visible] == [
            ("kiwi kept", 1, False)
        ]
        found = {
            h.message.content: (h.position, h.hidden) for h in s.search("kiwi", include_hidden=True)
        }
        assert found == {
            "kiwi kept": (1, False),
            "kiwi trimmed": (None, True),
            "kiwi popped": (None, True),
            "kiwi rolled back": (None, True),
            "kiwi summary undone": (None, True),
        }
        assert {h.session_id for h in store.search("kiwi", include_hidden=True)} == {"s"}

    def test_a_popped_message_stays_hidden_beside_another_session_s_summary(
        self, store: Any
    ) -> None:
        """A message popped and written over (stored, off the chain, at a depth the
        chain reaches again) is not found, while another session holds exactly as
        many summaries as this one holds such messages. Failing: PostgreSQL's check
        that a session's nodes all lie on its chain counted another session's
        summaries (a mutant survived the suite).
        """
        a = store.session("a")
        a.append([Message.user("a1"), Message.user("a2")])
        a.summarize(Message.system("summary"), through=a.history()[0].id)
        b = store.session("b")
        b.append([Message.user("b1"), Message.user("kiwi old")])
        b.pop()
        b.append([Message.user("b2")])
        assert store.search("kiwi") == []
        assert [h.message.content for h in store.search("summary")] == ["summary"]

    def test_a_popped_message_a_snapshot_keeps_stays_hidden_after_compact(self, store: Any) -> None:
        """A message popped and written over, kept by a snapshot, is not found after
        compact deleted the session's other popped messages (the session then stores
        fewer nodes than it made, as many as it made off its chain). Failing:
        PostgreSQL's check that a session's nodes all lie on its chain counted every
        indexed node of the session with the summaries (`AND` made `OR`; a mutant
        survived the suite).
        """
        s = store.session("s")
        s.append([Message.user("first")])
        s.append([Message.user("kiwi old")])
        s.snapshot("keep")
        s.pop()
        s.append([Message.user("second")])
        s.append(users(2, "junk"))
        s.pop()
        s.pop()
        store.compact(keep_events=0)  # the junk goes; the snapshot keeps "kiwi old"
        assert s.search("kiwi") == []
        s.rollback("keep")
        assert [h.message.content for h in s.search("kiwi")] == ["kiwi old"]

    def test_a_popped_message_stays_hidden_when_summaries_fill_the_count(self, store: Any) -> None:
        """A popped message, kept by a snapshot, stays hidden when compact deleted the
        trimmed nodes below it: the session stores 2 messages and 1 summary at depth
        4, its chain not linear. Failing: a memory mutant adding the summaries to the
        stored nodes instead of taking them away (3 + 1 = 4, the depth) took the chain
        for linear and found the popped message (it survived the suite).
        """
        s = store.session("s")
        s.append([Message.user("a"), Message.user("b"), Message.user("c"), Message.user("kiwi")])
        s.trim(keep_last=1)
        s.snapshot("keep")
        s.pop()
        g = Message.user("grape")
        s.append([g])
        s.summarize(Message.system("summary"), through=g.id)
        store.compact(keep_events=0)  # a, b and c go; the snapshot keeps kiwi
        assert s.search("kiwi") == []
        assert [h.message.content for h in s.search("grape")] == ["grape"]

    def test_a_summary_through_base_is_hidden(self, store: Any) -> None:
        """A summary whose ``through`` is exactly the base a trim set is hidden with
        the messages it covers: search does not find it. Failing: PostgreSQL's
        search took the summaries down to base, not above it, for visible (a mutant
        survived the suite).
        """
        s = store.session("s")
        s.append(users(3))
        s.summarize(Message.system("kiwi summary"), through=s.history()[1].id)
        s.trim(keep_last=1)  # base 2: the summary's through
        assert [m.content for m in s.history(full=True)] == ["m2"]
        assert s.search("kiwi") == []

    def test_an_undone_summary_stays_hidden(self, store: Any) -> None:
        """A summary pop undid is not found (in a session where every node made is
        on the chain or a summary). Failing: PostgreSQL's search took a hidden
        summary's hit for a message of the chain at its depth (a mutant survived).
        """
        s = store.session("s")
        s.append([Message.user("a"), Message.user("b")])
        s.summarize(Message.system("kiwi summary"), through=s.history()[-1].id)
        assert [h.message.content for h in s.search("kiwi")] == ["kiwi summary"]
        s.pop()  # nothing after the summary: undone
        assert s.search("kiwi") == []

    def test_a_trim_hides_down_to_base_in_a_session_never_popped(self, store: Any) -> None:
        """In a session that only ever appended, a trim hides every message up to and
        including the one at base: only the kept ones are found, at their places.
        Failing: PostgreSQL's search took the message at exactly base for a visible
        one, at place 0 (`base < depth` made `<=`; a mutant survived the suite).
        """
        s = store.session("s")
        s.append([Message.user(f"kiwi {i}") for i in range(4)])
        s.trim(keep_last=2)
        assert sorted((h.message.content, h.position) for h in s.search("kiwi")) == [
            ("kiwi 2", 1),
            ("kiwi 3", 2),
        ]

    def test_messages_written_after_a_search_are_found(self, store: Any) -> None:
        """Messages appended to a session after a search are found by the next one,
        whatever another session holds. Failing: PostgreSQL's index read one
        session's watermark for another and skipped the new messages (a mutant
        survived the suite).
        """
        store.session("a").append(users(5, "a"))
        b = store.session("b")
        b.append(users(2, "b"))
        assert store.search("kiwi") == []
        b.append([Message.user("kiwi late")])
        assert [h.message.content for h in store.search("kiwi")] == ["kiwi late"]

    def test_store_search_skips_deleted_and_forked_copies_stand_alone(self, store: Any) -> None:
        """A deleted session is not found; a fork's messages are found in the fork at
        its own positions. Failing: index rows outliving their session."""
        a = store.session("a")
        a.append([Message.user("plum one"), Message.user("plum two")])
        a.fork("b")
        store.session("c").append([Message.user("plum gone")])
        store.session("c").delete()
        found = sorted((h.session_id, h.position) for h in store.search("plum"))
        assert found == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
        assert store.search("gone") == []
        store.session("d").append([Message.user("plum plum plum")])
        asked = {h.session_id for h in store.search("plum", k=3, sessions=["a", "b"])}
        assert asked <= {"a", "b"} and len(store.search("plum", k=3, sessions=["a", "b"])) == 3

    def test_a_deleted_session_leaves_the_ranking_as_it_was(self, store: Any) -> None:
        """Once a session is deleted, its messages no longer weigh in the ranking's
        statistics: a short and a long match rank as they did before it existed
        (where the statistics span the store, its long messages, once indexed, put
        the long match first). Failing: the index statistics kept a deleted session's
        documents (PostgreSQL's purge leaving its search_docs rows survived the suite).
        """
        s = store.session("s")
        s.append(
            [
                Message.user("melon"),
                Message.user("melon melon melon " + " ".join(f"w{i}" for i in range(7))),
            ]
        )
        before = [h.message.content for h in s.search("melon")]
        gone = store.session("gone")
        gone.append([Message.user(" ".join(f"x{i}" for i in range(2000))) for _ in range(3)])
        assert len(store.search("melon")) == 2  # every session indexed
        gone.delete()
        assert [h.message.content for h in s.search("melon")] == before

    def test_compacted_messages_leave_the_ranking_statistics(self, store: Any) -> None:
        """Once compact deletes the messages a trim hid, they weigh no more in the
        ranking's statistics: every score is exactly what it was while the store held
        only what is left (as many documents, as long, holding the words as often).
        Failing: PostgreSQL's compact left a deleted node's postings behind, counted
        in its words' idf, or deleted a kept node's (mutants survived the suite).
        """
        s = store.session("s")
        s.append([Message.user("melon"), Message.user("melon pie melon"), Message.user("fig")])
        stand_in = store.session("stand-in")
        stand_in.append([Message.user("fig words")])

        def scores() -> list[tuple[str, float]]:
            return [(str(h.message.content), h.score) for h in s.search("melon fig", k=10)]

        before = scores()
        t = store.session("t")
        t.append(
            [Message.user("melon melon fig"), Message.user("fig melon"), Message.user("fig words")]
        )
        assert len(store.search("melon", k=10)) == 4  # t's messages are indexed
        t.trim(keep_last=1)
        stand_in.delete()  # t's last message stands in for it
        assert store.compact(keep_events=0).nodes == 2
        after = scores()
        assert [text for text, _ in after] == [text for text, _ in before]
        assert [score for _, score in after] == pytest.approx(
            [score for _, score in before], rel=1e-9
        )

    @pytest.mark.parametrize("seed", range(3))
    def test_hits_are_the_full_view_after_random_pops_and_rollbacks(
        self, store: Any, seed: int
    ) -> None:
        """After random appends, pops, rollbacks and summaries, every cut ``k`` of
        the ranking is the first ``k`` hits of the whole ranking, and the whole one
        is exactly the full view's messages holding a word of the query. Failing: a
        visibility shortcut (no walk, a walk not deep enough) that hides or shows the
        wrong messages."""
        rng = random.Random(seed)
        vocabulary = "ant bee cat dog elk fox".split()
        s = store.session("s")
        for step in range(30):
            roll = rng.random()
            length = len(s.history(full=True))
            if roll < 0.2 and length:
                s.pop()
            elif roll < 0.3:
                s.snapshot(f"at{step}")
            elif roll < 0.4 and s.snapshots():
                s.rollback(rng.choice(s.snapshots()).name)
            elif roll < 0.5 and (after := [m for m in s.history() if m.role == "user"]):
                s.summarize(
                    Message.system("summary " + rng.choice(vocabulary)),
                    through=rng.choice(after).id,
                )
            else:
                s.append(
                    [
                        Message.user(" ".join(rng.choices(vocabulary, k=rng.randint(1, 5))))
                        for _ in range(rng.randint(1, 6))
                    ]
                )
        full = s.history(full=True)
        for query in ("cat", "ant fox", "summary bee"):
            everything = s.search(query, k=1000)
            words = set(query.split())
            assert sorted(h.position for h in everything) == [
                i for i, m in enumerate(full, 1) if words & set(str(m.content).split())
            ]
            for h in everything:
                assert full[h.position - 1] == h.message
            for k in (1, 2, 5):
                assert [h.score for h in s.search(query, k=k)] == pytest.approx(
                    [h.score for h in everything[:k]], rel=1e-9
                )

    @pytest.mark.parametrize(
        "query",
        [
            '"cat',
            'cat"',
            "cat*",
            "NEAR(cat dog)",
            "cat NEAR dog",
            "words:cat",
            "cat & dog",
            "!cat",
            "cat | dog",
            "(cat",
            "cat)",
            "cat\x00dog",
            "cat\ud800dog",
            "'cat'",
            "cat:*",
            "AND cat OR NOT dog",
            "-cat",
            "^cat",
            "cat" + " dog" * 200_000,
        ],
    )
    def test_query_syntax_is_only_words(self, store: Any, query: str) -> None:
        """FTS5 and tsquery syntax, NUL, a lone surrogate, a megabyte query: only
        their words are searched, never a backend error. Failing: the query reaches
        the backend's own syntax."""
        s = store.session("s")
        s.append([Message.user("cat and dog"), Message.user("NEAR AND OR NOT words")])
        hits = s.search(query)
        assert "cat and dog" in [h.message.content for h in hits]

    def test_compact_leaves_no_trace_in_the_ranking(self, store: Any) -> None:
        """Once compact has deleted a session's hidden messages and undone summary,
        the store ranks as though they had never been written: the same scores as
        before. Failing: SQLite kept the deleted nodes' rows in its search index, which
        count in the statistics BM25 ranks by (mutants survived).
        """
        t = store.session("t")
        t.append([Message.user("kiwi two"), *users(8)])  # kiwi is rare: its idf counts
        before = [(h.message.content, h.score) for h in store.search("kiwi")]
        s = store.session("s")
        s.append([Message.user("kiwi one kiwi", id="a"), Message.user("b", id="b")])
        s.summarize(Message.system("kiwi summary", id="S"), through="b")
        s.pop()  # nothing after the summary: undone
        indexed = hasattr(store.backend, "search")  # an index, which finds hidden ones
        assert len(store.search("kiwi", include_hidden=indexed)) == 2 + indexed
        s.clear()
        assert store.compact(keep_events=0).nodes == 3
        after = [(h.message.content, h.score) for h in store.search("kiwi")]
        assert after == [(c, pytest.approx(score, rel=1e-12)) for c, score in before]
        assert store.search("kiwi", include_hidden=indexed) == store.search("kiwi")
