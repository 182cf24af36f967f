"""What a SQLite store's search index would answer once the messages it lags behind
were in it, answered without writing them: a read-only store cannot write, and a
read-write one does not wait while another connection holds the write lock.

FTS5 ranks with bm25() over the whole table's statistics: its row count, the total
of its rows' lengths (the index's averages record) and, for each phrase, how many
rows hold it. Indexing more rows changes all three, so the scores of the rows
already indexed change too: ranking the lagging rows apart and merging would give
other scores and another order than the next search, which indexes them. So
:func:`ranked` scores every matching row, indexed or lagging, as FTS5's
``fts5Bm25Function`` will once they are indexed: the same operations in the same
order (the same doubles), over the statistics the table will have. A row's tokens
are the words :func:`memvault.words.body_words` gave it (joined by spaces in the
index, so FTS5's tokenizer makes the same tokens of them).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from memvault.words import K1, B

_AVERAGES = 1  # the rowid of FTS5's averages record in search_data


def _varints(blob: bytes) -> Iterator[int]:
    """The varints of an FTS5 record (SQLite's: big-endian, 7 bits a byte while the
    high bit says another follows; a ninth byte gives all 8)."""
    i = 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        yield value


def _totals(db: sqlite3.Connection) -> tuple[int, int]:
    """The indexed rows' count and their tokens' (the averages record: the row
    count, then each column's token total; empty, or none, before the first row)."""
    r = db.execute("SELECT block FROM search_data WHERE id = ?", (_AVERAGES,)).fetchone()
    rows, tokens, *_ = [*_varints(r[0] if r else b""), 0, 0]
    return rows, tokens


def ranked(
    db: sqlite3.Connection,
    lagging: dict[int, Counter[str]],
    span: tuple[int, int],
    terms: Sequence[str],
    phrase: Callable[[str], str],
) -> list[tuple[int, float]]:
    """``(rowid, score)`` of the rows within ``span`` (indexed, or ``lagging``: rowid
    -> its tokens' counts) holding any of ``terms``, best first (equal scores by
    rowid, as FTS5 yields them), scored as FTS5's bm25 will once ``lagging`` is
    indexed (the score being -bm25). ``phrase(term)``: the FTS5 query of one term."""
    rows, tokens = _totals(db)
    rows += len(lagging)
    tokens += sum(counts.total() for counts in lagging.values())
    holding: list[set[int]] = []
    idf: list[float] = []
    for term in terms:
        indexed = {
            r
            for (r,) in db.execute("SELECT rowid FROM search WHERE search MATCH ?", (phrase(term),))
        }
        held = indexed | {rowid for rowid, counts in lagging.items() if term in counts}
        value = math.log((rows - len(held) + 0.5) / (len(held) + 0.5))
        idf.append(value if value > 0.0 else 1e-6)
        holding.append(held)
    first, last = span
    found = {rowid for held in holding for rowid in held if first <= rowid <= last}
    counts = {rowid: lagging[rowid] for rowid in found if rowid in lagging}
    stored = [rowid for rowid in found if rowid not in lagging]
    for rowid, words in db.execute(
        "SELECT rowid, words FROM search WHERE rowid IN (SELECT value FROM json_each(?))",
        (json.dumps(stored),),
    ):
        counts[rowid] = Counter(words.split())
    avgdl = tokens / rows if rows else 1.0
    scores: list[tuple[int, float]] = []
    for rowid, tf in counts.items():
        length = tf.total()
        score = 0.0
        for term, weight in zip(terms, idf, strict=True):
            f = float(tf[term])
            score += weight * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * length / avgdl)))
        scores.append((rowid, score))
    scores.sort(key=lambda item: (-item[1], item[0]))
    return scores


__all__ = ["ranked"]
