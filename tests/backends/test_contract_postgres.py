"""The contract suite against PostgreSQL (a fresh schema per test), both faces."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

import memvault
import memvault.store
from memvault.backends.postgres import calls as postgres_calls
from memvault.errors import CorruptRecordError
from memvault.messages import Message
from memvault.testing import AsyncStoreContract, StoreContract
from memvault.testing.contract.base import users
from memvault.testing.contract.ttl import FrozenClock
from memvault.words import K1, B, words
from tests.support.postgres import admin, corrupt, damage, postgres_url, schema_of


class PostgresContract:
    @pytest.fixture
    def store_url(self, request: pytest.FixtureRequest, tmp_path: Path) -> str:
        return postgres_url(request, tmp_path)

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        if isinstance(body, bytes):
            pytest.skip("a PostgreSQL text column holds only UTF-8")
        corrupt(store.options.url, session_id, depth, body)

    def damage(self, store: Any, session_id: str, depth: int, kind: str) -> None:
        damage(store.options.url, session_id, depth, kind)

    def test_compact_refuses_two_children_naming_their_parent_at_two_depths(
        self, store: Any
    ) -> None:
        """A node whose parent link is damaged to a node at another depth, while a
        sibling stored below it names that parent rightly: compact raises
        CorruptRecordError naming the depth below the sibling and deletes nothing.
        Failing: _garbage checked a parent's depth only for a parent out of range
        (`OR` made `AND`), so the sibling's claim overwrote the damaged one and
        compact went through (a mutant survived the suite).
        """
        s = store.session("s")
        s.append([Message.user(f"m{i}") for i in range(3)])
        s.pop()
        s.append([Message.user("m3")])  # node 4, its parent node 2, like node 3's
        q = f'"{schema_of(store.options.url)}"'
        sid = f"(SELECT sid FROM {q}.sessions WHERE name = 's'::bytea)"
        with admin() as conn:
            assert (
                conn.execute(
                    f"UPDATE {q}.nodes SET parent = 1 WHERE sid = {sid} AND node = 4"
                ).rowcount
                == 1
            )
        with pytest.raises(CorruptRecordError) as raised:
            store.compact()  # the pop's event keeps node 3, the rightful child
        assert (raised.value.session_id, raised.value.depth) == ("s", 1)
        with admin() as conn:
            assert conn.execute(f"SELECT count(*) FROM {q}.nodes WHERE sid = {sid}").fetchone() == (
                4,
            )

    def test_compact_names_the_highest_of_two_breaks(self, store: Any) -> None:
        """Two damaged links, node 4's parent made 0 (no node) and node 2's itself:
        compact raises CorruptRecordError at depth 3, the first break below the head,
        and deletes nothing. Failing: _garbage took a parent link 0 for a node (`NOT
        BETWEEN 1` made `NOT BETWEEN 0`), went on and named the break below (depth 1;
        a mutant survived the suite).
        """
        s = store.session("s")
        for i in range(4):
            s.append([Message.user(f"m{i}")])
        q = f'"{schema_of(store.options.url)}"'
        sid = f"(SELECT sid FROM {q}.sessions WHERE name = 's'::bytea)"
        with admin() as conn:
            for node, parent in ((4, "0"), (2, "node")):
                assert (
                    conn.execute(
                        f"UPDATE {q}.nodes SET parent = {parent}"
                        f" WHERE sid = {sid} AND node = {node}"
                    ).rowcount
                    == 1
                )
        with pytest.raises(CorruptRecordError) as raised:
            store.compact()
        assert (raised.value.session_id, raised.value.depth) == ("s", 3)
        with admin() as conn:
            assert conn.execute(f"SELECT count(*) FROM {q}.nodes WHERE sid = {sid}").fetchone() == (
                4,
            )

    def test_a_version_whose_logged_base_is_below_zero_is_corrupt(self, store: Any) -> None:
        """history(at_version=N) of a version whose event was damaged to a base below
        0 raises CorruptRecordError (the chain it names runs past the first message),
        never a shorter history. Failing: chain() counted `depth + base` messages
        when no `last` was given, one message here (a mutant survived the suite).
        """
        s = store.session("s")
        s.append(users(3))
        q = f'"{schema_of(store.options.url)}"'
        with admin() as conn:
            assert (
                conn.execute(
                    f"UPDATE {q}.events SET base_after = -2 WHERE version = 1 AND sid ="
                    f" (SELECT sid FROM {q}.sessions WHERE name = 's'::bytea)"
                ).rowcount
                == 1
            )
        with pytest.raises(CorruptRecordError):
            s.history(at_version=1)

    def test_search_skips_what_it_read_of_a_session_restarted_since(
        self, opener: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A session that expires and is written afresh between the index's read of
        the new messages and its write of them (another client's write) is not
        indexed from that read: its old message is not found under its node id,
        and its new one is found by the next search. Failing: search_index matched
        the read's nodes to their session by its row alone, not by the instant it was
        created (`AND` made `OR`; a mutant survived the suite).
        """
        clock = FrozenClock(float(int(time.time())))
        monkeypatch.setattr(memvault.store, "time", clock)
        store = opener(ttl=60)
        writer = memvault.open(store.options.url, ttl=60)  # the other client, sync
        try:
            s = store.session("s")
            s.append([Message.user("kiwi old")])
            postings, restarts = postgres_calls._postings, [60.0]

            def restarted_first(pending: Any) -> Any:
                for ttl in restarts:  # once: the session expires, a write restarts it
                    clock.now += ttl
                    writer.session("s").append([Message.user("fresh words")])
                restarts.clear()
                return postings(pending)

            monkeypatch.setattr(postgres_calls, "_postings", restarted_first)
            assert s.search("kiwi") == []
            assert [h.message.content for h in s.search("fresh")] == ["fresh words"]
        finally:
            writer.close()
            store.close()

    def test_a_snapshot_of_the_next_node_to_be_made_is_corrupt(self, store: Any) -> None:
        """A snapshot damaged to a head one past the session's last node (the id the
        next node will get, not stored) is refused: snapshots() and rollback raise
        CorruptRecordError naming it, and nothing is written. Failing: _snapshot_ok
        let a head equal to next_node through (`>=` made `>`; a mutant of the check
        survived the suite).
        """
        s = store.session("s")
        s.append(users(3))
        s.snapshot("here")
        q = f'"{schema_of(store.options.url)}"'
        with admin() as conn:
            assert (
                conn.execute(
                    f"UPDATE {q}.snapshots n SET head = s.next_node FROM {q}.sessions s"
                    " WHERE n.sid = s.sid AND s.name = 's'::bytea"
                ).rowcount
                == 1
            )
        with pytest.raises(CorruptRecordError, match="'here'"):
            s.snapshots()
        with pytest.raises(CorruptRecordError, match="'here'"):
            s.rollback("here")
        assert [m.content for m in s.history()] == ["m0", "m1", "m2"]
        assert s.info().version == 1

    def test_scores_are_okapi_bm25_over_every_stored_message(self, store: Any) -> None:
        """Each hit's score is Okapi BM25 as docs/recall.md states it for PostgreSQL
        (k1 1.2, b 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5))), N and the mean length
        over every indexed message of the store, a popped one and another session's
        too, summed over the query's words: exactly, by a hand computation. Failing:
        mutants of search's idf arithmetic and length normalisation survived the
        suite (one-word rankings keep their order under them).
        """
        s = store.session("s")
        s.append(
            [
                Message.user(text)
                for text in (
                    "cat dog",
                    "cat",
                    "cat bird fish",
                    "dog fish",
                    "cat cat emu",
                    "fish fish fish",
                )
            ]
        )
        s.pop()  # hidden, still indexed: it counts in N, n and the mean length
        store.session("t").append([Message.user("cat owl owl owl")])
        bodies = [
            words(text)
            for text in (
                "cat dog",
                "cat",
                "cat bird fish",
                "dog fish",
                "cat cat emu",
                "fish fish fish",
                "cat owl owl owl",
            )
        ]
        mean = sum(map(len, bodies)) / len(bodies)

        def bm25(body: list[str], query: list[str]) -> float:
            score = 0.0
            for term in query:
                n = sum(term in b for b in bodies)
                tf = body.count(term)
                idf = math.log(1 + (len(bodies) - n + 0.5) / (n + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(body) / mean))
            return score

        for query in (["cat", "fish"], ["dog", "emu", "cat"], ["owl"]):
            got = {h.message.content: h.score for h in s.search(" ".join(query), k=10)}
            expected = {" ".join(b): bm25(b, query) for b in bodies[:5] if set(b) & set(query)}
            assert got == pytest.approx(expected, rel=1e-12)


class TestPostgres(PostgresContract, StoreContract):
    pass


class TestPostgresAsync(PostgresContract, AsyncStoreContract):
    pass
