"""The contract suite against PostgreSQL (a fresh schema per test), both faces."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from memvault.errors import CorruptRecordError
from memvault.messages import Message
from memvault.testing import AsyncStoreContract, StoreContract
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
            self, store: Any) -> None:
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
            assert conn.execute(f"UPDATE {q}.nodes SET parent = 1 WHERE sid = {sid}"
                                " AND node = 4").rowcount == 1
        with pytest.raises(CorruptRecordError) as raised:
            store.compact()  # the pop's event keeps node 3, the rightful child
        assert (raised.value.session_id, raised.value.depth) == ("s", 1)
        with admin() as conn:
            assert conn.execute(f"SELECT count(*) FROM {q}.nodes WHERE sid = {sid}"
                                ).fetchone() == (4,)

    def test_scores_are_okapi_bm25_over_every_stored_message(self, store: Any) -> None:
        """Each hit's score is Okapi BM25 as docs/recall.md states it for PostgreSQL
        (k1 1.2, b 0.75, idf ln(1 + (N - n + 0.5) / (n + 0.5))), N and the mean length
        over every indexed message of the store, a popped one and another session's
        too, summed over the query's words: exactly, by a hand computation. Failing:
        mutants of search's idf arithmetic and length normalisation survived the
        suite (one-word rankings keep their order under them).
        """
        s = store.session("s")
        s.append([Message.user(text) for text in (
            "cat dog", "cat", "cat bird fish", "dog fish", "cat cat emu", "fish fish fish")])
        s.pop()  # hidden, still indexed: it counts in N, n and the mean length
        store.session("t").append([Message.user("cat owl owl owl")])
        bodies = [words(text) for text in (
            "cat dog", "cat", "cat bird fish", "dog fish", "cat cat emu", "fish fish fish",
            "cat owl owl owl")]
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
