"""The SQLite backend's file: its versioned schema (``PRAGMA user_version``), how a
node's rowid is made, the statements that read it, and the search index's filling."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterable, Sequence

from memvault.backends.engine.core import Row
from memvault.paging import NEVER
from memvault.words import body_words

SCHEMA_VERSION = 7
SUMMARY_BIT = 1 << 32
SESSION_SHIFT = 33


def rowid_of(sid: int, node: int, summary: bool = False) -> int:
    """The search index's rowid of a node: its session's sid, then a summary bit,
    then the node id, so a session's rows (and its messages' rows) are one range.
    As a message, also the node's rowid in nodes (schema 5): a session's nodes are
    one range of it too."""
    return (sid << SESSION_SHIFT) | (SUMMARY_BIT if summary else 0) | node


# Copy a row's live keys to the settled ones the paging indexes sort on (schema 7).
SETTLED = (
    "page_version = version, page_length = length_key, page_updated = updated_at,"
    " page_expires = expires_key"
)
SETTLE_AT = 256
"""The most unsettled session rows a store keeps (schema 7): a page reads them all."""

MIGRATIONS = {
    1: """
    CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        head INTEGER NOT NULL, depth INTEGER NOT NULL, base INTEGER NOT NULL,
        version INTEGER NOT NULL, next_node INTEGER NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, expires_at REAL
    );
    CREATE TABLE nodes (
        sid INTEGER NOT NULL, node INTEGER NOT NULL, parent INTEGER NOT NULL,
        depth INTEGER NOT NULL, msg_id TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (sid, node)
    );
    CREATE UNIQUE INDEX nodes_msg_id ON nodes (sid, msg_id);
    CREATE TABLE snapshots (
        sid INTEGER NOT NULL, name TEXT NOT NULL, head INTEGER NOT NULL,
        base INTEGER NOT NULL, version INTEGER NOT NULL, length INTEGER NOT NULL,
        created_at REAL NOT NULL, auto INTEGER NOT NULL,
        UNIQUE (sid, name)
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY, sid INTEGER NOT NULL, version INTEGER NOT NULL,
        op TEXT NOT NULL, writer TEXT NOT NULL, at REAL NOT NULL,
        head_before INTEGER NOT NULL, base_before INTEGER NOT NULL,
        head_after INTEGER NOT NULL, base_after INTEGER NOT NULL, detail TEXT NOT NULL
    );
    CREATE INDEX events_sid ON events (sid, id);
    """,
    # Summaries: the session's and each snapshot's summary pointer (summary node,
    # depth of the last message it stands for); 0, 0 is none, as for older files.
    2: """
    ALTER TABLE sessions ADD COLUMN summary INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN through INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE snapshots ADD COLUMN summary INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE snapshots ADD COLUMN through INTEGER NOT NULL DEFAULT 0;
    """,
    # Paged listing: one index per order (then name), so a page reads only its rows.
    # The computed keys are virtual columns: SQLite seeks an index by a row value
    # (key, name) > (?, ?) on columns, not on an expression index.
    3: """
    ALTER TABLE sessions ADD COLUMN length_key INTEGER GENERATED ALWAYS AS (
        depth - max(base, through) + (summary <> 0 AND through > base)) VIRTUAL;
    ALTER TABLE sessions ADD COLUMN expires_key REAL GENERATED ALWAYS AS (
        ifnull(expires_at, 1e308)) VIRTUAL;
    CREATE INDEX sessions_by_version ON sessions (version, name);
    CREATE INDEX sessions_by_length ON sessions (length_key, name);
    CREATE INDEX sessions_by_updated ON sessions (updated_at, name);
    CREATE INDEX sessions_by_expires ON sessions (expires_key, name);
    """,
    # Search: an FTS5 index of every node's words (memvault.words.body_words, joined
    # by spaces, so FTS5's tokenizer only splits them again), beside the chain and
    # filled from it by backfill. Its rowid names the node (rowid_of). detail=full:
    # bm25 over it measured twice as fast as over detail=column. An append only
    # notes its nodes' rowids in search_pending, in its own transaction; a search
    # first indexes the nodes noted there (SqliteBackend.search; schema 6 replaces
    # search_pending by the sessions' pending). Writing FTS5 at
    # each append cost it 40 us more for the segment FTS5 writes at each commit,
    # whatever its detail, and the words 30 us more (95 -> 175 us median per
    # append, durability=normal, load 11).
    4: """
    CREATE VIRTUAL TABLE search USING fts5(
        words, tokenize = 'unicode61 remove_diacritics 0'
    );
    CREATE TABLE search_pending (id INTEGER PRIMARY KEY);
    """,
    # Fewer B-trees written per append (12.7 -> 10.7 WAL pages; raw sqlite3 writes
    # 2.6). A node's rowid is its key, rowid_of(sid, node) (the search index's rowid
    # of it as a message), instead of a primary key index beside a rowid table:
    # each step of a chain walk is then one search, not two. (A WITHOUT ROWID table
    # keyed by (sid, node) wrote more pages, not fewer: its interior pages hold
    # whole rows, a few bodies each.) Events are stored in the order of their (sid,
    # id) key, replacing the events_sid index; id counts each session's events.
    # The upgrade copies both tables once, in the opening process's write
    # transaction (other writers wait, up to their busy_timeout): 200,000 messages
    # in 10,000 sessions (a 150 MB file) took 3.2 s at load 8, and the file grew to
    # 287 MB (the old tables' pages stay in it, free for reuse; VACUUM returns them).
    5: f"""
    CREATE TABLE nodes_5 (
        id INTEGER PRIMARY KEY, sid INTEGER NOT NULL, node INTEGER NOT NULL,
        parent INTEGER NOT NULL, depth INTEGER NOT NULL, msg_id TEXT NOT NULL,
        body TEXT NOT NULL
    );
    INSERT INTO nodes_5 SELECT (sid << {SESSION_SHIFT}) | node, sid, node, parent, depth,
        msg_id, body FROM nodes;
    DROP TABLE nodes;
    ALTER TABLE nodes_5 RENAME TO nodes;
    CREATE UNIQUE INDEX nodes_msg_id ON nodes (sid, msg_id);
    CREATE TABLE events_5 (
        sid INTEGER NOT NULL, id INTEGER NOT NULL, version INTEGER NOT NULL,
        op TEXT NOT NULL, writer TEXT NOT NULL, at REAL NOT NULL,
        head_before INTEGER NOT NULL, base_before INTEGER NOT NULL,
        head_after INTEGER NOT NULL, base_after INTEGER NOT NULL, detail TEXT NOT NULL,
        PRIMARY KEY (sid, id)
    ) WITHOUT ROWID;
    INSERT INTO events_5 SELECT sid, id, version, op, writer, at, head_before, base_before,
        head_after, base_after, detail FROM events;
    DROP TABLE events;
    ALTER TABLE events_5 RENAME TO events;
    """,
    # The search index's lag as one number per session instead of a row per node:
    # pending, the session's first node not yet in the search index (0: none; every
    # node from it to next_node - 1 is a message, not a summary, none indexed). An
    # append sets it only when it was 0 (the first append after a search), so the
    # usual append writes no index entry for search at all (search_pending's insert
    # was an extra B-tree page and statement in every append's commit). The partial
    # index finds the sessions a search must catch up. The upgrade indexes the
    # nodes search_pending noted (SqliteBackend._migrate).
    6: """
    ALTER TABLE sessions ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX sessions_pending ON sessions (pending) WHERE pending <> 0;
    """,
    # Settled paging keys: the four paging indexes sort on stored copies of the keys
    # (page_*) instead of the live columns, which every append moved (three or four
    # index entries rewritten per commit). A row whose live keys moved since they
    # were copied is unsettled; the partial index lists those rows, and a page reads
    # them there, on their live keys (SqliteBackend.sessions_page). An append flags
    # its row only on the first write after a settle; the write that makes the list
    # longer than SETTLE_AT settles them all (SqliteTxn.save). The upgrade settles
    # every row.
    7: f"""
    ALTER TABLE sessions ADD COLUMN page_version INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN page_length INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN page_updated REAL NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN page_expires REAL NOT NULL DEFAULT {NEVER};
    ALTER TABLE sessions ADD COLUMN unsettled INTEGER NOT NULL DEFAULT 0;
    DROP INDEX sessions_by_version;
    DROP INDEX sessions_by_length;
    DROP INDEX sessions_by_updated;
    DROP INDEX sessions_by_expires;
    UPDATE sessions SET {SETTLED};
    CREATE INDEX sessions_by_version ON sessions (page_version, name);
    CREATE INDEX sessions_by_length ON sessions (page_length, name);
    CREATE INDEX sessions_by_updated ON sessions (page_updated, name);
    CREATE INDEX sessions_by_expires ON sessions (page_expires, name);
    CREATE INDEX sessions_unsettled ON sessions (unsettled) WHERE unsettled;
    """,
}
# Each order's key: its live column, and the settled copy its index sorts on (the id
# order: the name itself); 1e308 is paging.NEVER.
KEYS = {
    "version": ("version", "page_version"),
    "length": ("length_key", "page_length"),
    "updated": ("updated_at", "page_updated"),
    "expires": ("expires_key", "page_expires"),
}
LISTED = (
    "name, version, length_key, created_at, updated_at, expires_at, "
    "CASE WHEN summary <> 0 AND through > base THEN through - base ELSE 0 END"
)


def span_of(row: Row) -> tuple[int, int]:
    """The first and last rowid of a session's nodes and of its search index rows."""
    assert isinstance(row.key, int)
    return rowid_of(row.key, 0), rowid_of(row.key + 1, 0) - 1


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``, each a quoted string: words only, so
    nothing in them is FTS5 syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


ROW = (
    "sid, name, head, depth, base, version, next_node, created_at, updated_at, expires_at,"
    " summary, through, pending, unsettled"
)
LOAD = f"SELECT {ROW} FROM sessions WHERE name = ?"  # a session's row, by its id
SNAP = "name, head, base, version, length, created_at, auto, summary, through"
EVENT = "version, op, writer, at, head_before, base_before, head_after, base_after, detail"
CHAIN = f"""
WITH RECURSIVE chain(node, parent, depth, msg_id, body) AS (
    SELECT node, parent, depth, msg_id, body FROM nodes
    WHERE id = (:sid << {SESSION_SHIFT}) | :head
    UNION ALL
    SELECT n.node, n.parent, n.depth, n.msg_id, n.body
    FROM chain c JOIN nodes n ON n.id = (:sid << {SESSION_SHIFT}) | c.parent
    LIMIT :count
) SELECT node, parent, depth, msg_id, body FROM chain
"""

# the nodes not yet in the search index (messages all), with their rowid there
PENDING = f"""
SELECT n.id, n.body FROM sessions s
JOIN nodes n ON n.id BETWEEN (s.sid << {SESSION_SHIFT}) | s.pending
                         AND (s.sid << {SESSION_SHIFT}) | (s.next_node - 1)
WHERE s.pending <> 0
"""
# what schema 5 noted for the index (search_pending), as PENDING
NOTED = f"""
SELECT p.id, n.body FROM search_pending p
JOIN nodes n ON n.id = p.id & ~{SUMMARY_BIT}
"""
ANCESTORS = f"""
WITH RECURSIVE chain(node, parent, k) AS (
    SELECT ?1, n.parent, 1 FROM nodes n WHERE n.id = (?2 << {SESSION_SHIFT}) | ?1
    UNION ALL
    SELECT c.parent, n.parent, c.k + 1 FROM chain c
    JOIN nodes n ON n.id = (?2 << {SESSION_SHIFT}) | c.parent
    WHERE c.k < ?3
) SELECT node FROM chain
"""

# history(full=True) of a linear session in one statement: every node ever made
# (ids 1 .. next_node - 1) is the message at the depth of its id, so the full view
# is the nodes above base in id order, read as a range instead of walked (10,000
# nodes: 117 -> 33 ms, load 22). The session's row comes first (node columns NULL),
# then the nodes; none unless the session is linear.
FULL_LINEAR = f"""
SELECT s.depth - s.base, s.next_node - 1 = s.depth, NULL, NULL, NULL
FROM sessions s WHERE s.name = :name AND (s.expires_at IS NULL OR s.expires_at > :now)
UNION ALL
SELECT NULL, NULL, n.node, n.depth, n.body
FROM sessions s JOIN nodes n ON n.id BETWEEN ((s.sid << {SESSION_SHIFT}) | s.base) + 1
                                         AND (s.sid << {SESSION_SHIFT}) | (s.next_node - 1)
WHERE s.name = :name AND (s.expires_at IS NULL OR s.expires_at > :now)
  AND s.next_node - 1 = s.depth
"""

# history() in one statement: the live session's depth and how many nodes to read
# (those above the floor, the higher of base and the summary's through; at most
# :count, -1: all), then the chain walked back from head, newest first, never more
# steps than that (a node that is its own parent would loop for ever). A session
# whose chain is missing its head still yields one row (chain columns NULL). Then,
# marked 1 in the first column, the summary if the context view starts with it and
# it fits in :count (its body NULL if it is not stored).
HISTORY = f"""
WITH RECURSIVE s(sid, head, depth, above, want, summary, through, shows) AS (
    SELECT sid, head, depth, depth - max(base, through),
           CASE WHEN :count < 0 OR :count > depth - max(base, through)
                THEN depth - max(base, through) ELSE :count END,
           summary, through, summary <> 0 AND through > base
    FROM sessions WHERE name = :name AND (expires_at IS NULL OR expires_at > :now)
), chain(k, sid, want, parent, depth, body) AS (
    SELECT 1, s.sid, s.want, n.parent, n.depth, n.body
    FROM s JOIN nodes n ON n.id = (s.sid << {SESSION_SHIFT}) | s.head WHERE s.want > 0
    UNION ALL
    SELECT c.k + 1, c.sid, c.want, n.parent, n.depth, n.body
    FROM chain c JOIN nodes n ON n.id = (c.sid << {SESSION_SHIFT}) | c.parent
    WHERE c.k < c.want
)
SELECT 0, s.depth, s.want, c.depth, c.body FROM s LEFT JOIN chain c
UNION ALL
SELECT 1, s.depth, s.want, s.through, n.body
FROM s LEFT JOIN nodes n ON n.id = (s.sid << {SESSION_SHIFT}) | s.summary
WHERE s.shows AND (:count < 0 OR :count > s.above)
"""


# Search vectors (memvault.vectors): an index beside the chain, created when a store
# is first opened with an embedder, outside the versioned schema (dropping it loses
# nothing: `memvault reindex` rebuilds it). One float32 vector per text hash.
VECTORS = (
    "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS vector_space (space TEXT NOT NULL)",
)

MAX_IN = 64
_PARAMS = [f"({', '.join('?' * n)})" for n in range(MAX_IN + 1)]
JSON_IDS = "(SELECT value FROM json_each(?))"  # the ids of a larger batch, as JSON


def ids_in(ids: Sequence[str]) -> tuple[str, Sequence[str]]:
    """The list ``msg_id IN`` is to test, and its arguments: the usual turn's ids bound
    one by one (cheaper than json_each), a larger batch's (past what a statement may
    bind) as one JSON array."""
    if len(ids) <= MAX_IN:
        return _PARAMS[len(ids)], ids
    return JSON_IDS, (json.dumps(list(ids)),)


def backfill(db: sqlite3.Connection) -> None:
    """Index the nodes a store written before the index holds. A summary is a node
    some summary pointer (of a session or a snapshot) reaches, or that summary's
    predecessors; an undone summary nobody points at any more is indexed as a
    message: it is hidden either way (it is on no chain)."""
    summaries: set[tuple[int, int]] = set()
    links = {
        (sid, node): parent
        for sid, node, parent in db.execute("SELECT sid, node, parent FROM nodes")
    }
    for sid, node in db.execute(
        "SELECT sid, summary FROM sessions UNION SELECT sid, summary FROM snapshots"
    ):
        while node and (sid, node) in links and (sid, node) not in summaries:
            summaries.add((sid, node))
            node = links[(sid, node)]
    index_bodies(
        db,
        (
            (rowid_of(sid, node, (sid, node) in summaries), body)
            for sid, node, body in db.execute("SELECT sid, node, body FROM nodes")
        ),
    )


def index_bodies(db: sqlite3.Connection, nodes: Iterable[tuple[int, str]]) -> None:
    """Add ``(rowid, body)`` nodes to the FTS5 index."""
    rows = iter(nodes)
    while batch := [(rowid, stored_words(body)) for rowid, body in itertools.islice(rows, 500)]:
        db.executemany("INSERT INTO search (rowid, words) VALUES (?, ?)", batch)


def stored_words(body: str) -> str:
    """The words of a stored body; none for one that cannot be read (reading it
    raises CorruptRecordError: the index need not say so too)."""
    try:
        return " ".join(body_words(body))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return ""
