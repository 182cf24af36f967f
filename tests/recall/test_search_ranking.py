"""The indexes that rank with memvault's own BM25 (memory, PostgreSQL) rank as the
exact scan does (:func:`memvault.search.rank`); Redis is searched by that scan.

SQLite is left out: it ranks with FTS5's ``bm25()``, whose idf (``log((N - n + 0.5)
/ (n + 0.5))``, floored near zero) differs from Okapi BM25's ``log(1 + ...)``, so
its scores and order differ from the scan's whenever a word is in half the
messages or more (docs/recall.md, "Search").
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import memvault
from memvault import Message
from memvault.search import rank
from tests.support.backends import BACKENDS

VOCABULARY = "ant bee cat dog elk fox gnu hen ibis jay koi".split()


@pytest.fixture(params=["memory", "postgres", "redis"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return BACKENDS[request.param](request, tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_index_ranks_as_the_scan_on_a_random_corpus(url: str, seed: int) -> None:
    """On a random corpus of appends and summaries (nothing hidden, so the index's
    statistics are the full view's), every cut ``k`` of the index's ranking is the
    scan's top ``k``: the same scores, each at a position the scan gives that score.
    Failing: a shortcut that stops before the best hits, or scores that are not BM25."""
    rng = random.Random(seed)
    with memvault.open(url) as store:
        s = store.session("s")
        for _ in range(30):  # about 600 messages: more than the first cut of a word's
            # postings that PostgreSQL reads (64), so it bounds the rest
            batch = [Message.user(" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 12))))
                     for _ in range(rng.randint(1, 40))]
            s.append(batch)
            if rng.random() < 0.3:
                s.summarize(Message.system(" ".join(rng.choices(VOCABULARY, k=4))),
                            through=batch[rng.randrange(len(batch))].id)
        full = s.history(full=True)
        for query in ("cat", "ant koi", "bee dog fox", "gnu hen ibis jay"):
            exact = rank(query.split(), [("s", full)], len(full))
            for k in (1, 3, 10, 70, len(full)):
                hits = s.search(query, k=k)
                assert [h.score for h in hits] == pytest.approx(
                    [h.score for h in exact[:k]], rel=1e-9)
                for h in hits:
                    assert full[h.position - 1] == h.message
                    assert h.score == pytest.approx(
                        next(e.score for e in exact if e.position == h.position), rel=1e-9)
