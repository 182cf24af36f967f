"""The SQLite backend (``sqlite:///relative.db``, ``sqlite:////abs/path.db``).

WAL mode; every write is one ``BEGIN IMMEDIATE`` transaction, so writers from any
number of threads and processes are serialized by SQLite's own lock (waiting up to
``busy_timeout``). Reads run in a deferred transaction: one consistent snapshot.
Each thread gets its own connection; when the thread ends, the next new thread gets it
(a few are kept idle; others are closed). A fork's child closes its copies of the
parent's connections and opens its own (:meth:`_Connections.forked`). The schema version lives in
``PRAGMA user_version``; a file written by a newer memvault is refused.

Durability: ``durability="full"`` (default) fsyncs the WAL on every commit, so an
acknowledged write survives power loss; ``"normal"`` survives a process crash
but may lose the last commits on power loss (SQLite's ``synchronous=NORMAL``).
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
import os
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, cast
from urllib.parse import quote

from memvault.backends.base import Backend, Match, Stored, Write
from memvault.backends.engine import Node, Row, Txn, check_chain, decoded, json_object
from memvault.backends.lexical import IndexedEngine
from memvault.backends.sqlite_lag import ranked
from memvault.backends.url import read_options, redact
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    message_missing,
)
from memvault.model import Event, SessionInfo, Snapshot, check_seconds, to_datetime, utc
from memvault.paging import NEVER, Listed, PageQuery
from memvault.words import body_words

SCHEMA_VERSION = 7
_SUMMARY_BIT = 1 << 32
_SESSION_SHIFT = 33


def _rowid(sid: int, node: int, summary: bool = False) -> int:
    """The search index's rowid of a node: its session's sid, then a summary bit,
    then the node id, so a session's rows (and its messages' rows) are one range.
    As a message, also the node's rowid in nodes (schema 5): a session's nodes are
    one range of it too."""
    return (sid << _SESSION_SHIFT) | (_SUMMARY_BIT if summary else 0) | node


# Copy a row's live keys to the settled ones the paging indexes sort on (schema 7).
_SETTLED = ("page_version = version, page_length = length_key, page_updated = updated_at,"
            " page_expires = expires_key")
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
    # Search: an FTS5 index of every node's words (memvault.search.body_words, joined
    # by spaces, so FTS5's tokenizer only splits them again), beside the chain and
    # filled from it by _backfill. Its rowid names the node (_rowid). detail=full:
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
    # 2.6). A node's rowid is its key, _rowid(sid, node) (the search index's rowid
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
    INSERT INTO nodes_5 SELECT (sid << {_SESSION_SHIFT}) | node, sid, node, parent, depth,
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
    # longer than SETTLE_AT settles them all (_SqliteTxn.save). The upgrade settles
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
    UPDATE sessions SET {_SETTLED};
    CREATE INDEX sessions_by_version ON sessions (page_version, name);
    CREATE INDEX sessions_by_length ON sessions (page_length, name);
    CREATE INDEX sessions_by_updated ON sessions (page_updated, name);
    CREATE INDEX sessions_by_expires ON sessions (page_expires, name);
    CREATE INDEX sessions_unsettled ON sessions (unsettled) WHERE unsettled;
    """,
}
# Each order's key: its live column, and the settled copy its index sorts on (the id
# order: the name itself); 1e308 is paging.NEVER.
_KEYS = {"version": ("version", "page_version"), "length": ("length_key", "page_length"),
         "updated": ("updated_at", "page_updated"), "expires": ("expires_key", "page_expires")}
_LISTED = ("name, version, length_key, created_at, updated_at, expires_at, "
           "CASE WHEN summary <> 0 AND through > base THEN through - base ELSE 0 END")


def _span(row: Row) -> tuple[int, int]:
    """The first and last rowid of a session's nodes and of its search index rows."""
    assert isinstance(row.key, int)
    return _rowid(row.key, 0), _rowid(row.key + 1, 0) - 1


def _fts_query(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``, each a quoted string: words only, so
    nothing in them is FTS5 syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)

_ROW = ("sid, name, head, depth, base, version, next_node, created_at, updated_at, expires_at,"
        " summary, through, pending, unsettled")
_LOAD = f"SELECT {_ROW} FROM sessions WHERE name = ?"  # a session's row, by its id
_SNAP = "name, head, base, version, length, created_at, auto, summary, through"
_EVENT = "version, op, writer, at, head_before, base_before, head_after, base_after, detail"
_CHAIN = f"""
WITH RECURSIVE chain(node, parent, depth, msg_id, body) AS (
    SELECT node, parent, depth, msg_id, body FROM nodes
    WHERE id = (:sid << {_SESSION_SHIFT}) | :head
    UNION ALL
    SELECT n.node, n.parent, n.depth, n.msg_id, n.body
    FROM chain c JOIN nodes n ON n.id = (:sid << {_SESSION_SHIFT}) | c.parent
    LIMIT :count
) SELECT node, parent, depth, msg_id, body FROM chain
"""

# the nodes not yet in the search index (messages all), with their rowid there
_PENDING = f"""
SELECT n.id, n.body FROM sessions s
JOIN nodes n ON n.id BETWEEN (s.sid << {_SESSION_SHIFT}) | s.pending
                         AND (s.sid << {_SESSION_SHIFT}) | (s.next_node - 1)
WHERE s.pending <> 0
"""
# what schema 5 noted for the index (search_pending), as _PENDING
_NOTED = f"""
SELECT p.id, n.body FROM search_pending p
JOIN nodes n ON n.id = p.id & ~{_SUMMARY_BIT}
"""
_ANCESTORS = f"""
WITH RECURSIVE chain(node, parent, k) AS (
    SELECT ?1, n.parent, 1 FROM nodes n WHERE n.id = (?2 << {_SESSION_SHIFT}) | ?1
    UNION ALL
    SELECT c.parent, n.parent, c.k + 1 FROM chain c
    JOIN nodes n ON n.id = (?2 << {_SESSION_SHIFT}) | c.parent
    WHERE c.k < ?3
) SELECT node FROM chain
"""

# history(full=True) of a linear session in one statement: every node ever made
# (ids 1 .. next_node - 1) is the message at the depth of its id, so the full view
# is the nodes above base in id order, read as a range instead of walked (10,000
# nodes: 117 -> 33 ms, load 22). The session's row comes first (node columns NULL),
# then the nodes; none unless the session is linear.
_FULL_LINEAR = f"""
SELECT s.depth - s.base, s.next_node - 1 = s.depth, NULL, NULL, NULL
FROM sessions s WHERE s.name = :name AND (s.expires_at IS NULL OR s.expires_at > :now)
UNION ALL
SELECT NULL, NULL, n.node, n.depth, n.body
FROM sessions s JOIN nodes n ON n.id BETWEEN ((s.sid << {_SESSION_SHIFT}) | s.base) + 1
                                         AND (s.sid << {_SESSION_SHIFT}) | (s.next_node - 1)
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
_HISTORY = f"""
WITH RECURSIVE s(sid, head, depth, above, want, summary, through, shows) AS (
    SELECT sid, head, depth, depth - max(base, through),
           CASE WHEN :count < 0 OR :count > depth - max(base, through)
                THEN depth - max(base, through) ELSE :count END,
           summary, through, summary <> 0 AND through > base
    FROM sessions WHERE name = :name AND (expires_at IS NULL OR expires_at > :now)
), chain(k, sid, want, parent, depth, body) AS (
    SELECT 1, s.sid, s.want, n.parent, n.depth, n.body
    FROM s JOIN nodes n ON n.id = (s.sid << {_SESSION_SHIFT}) | s.head WHERE s.want > 0
    UNION ALL
    SELECT c.k + 1, c.sid, c.want, n.parent, n.depth, n.body
    FROM chain c JOIN nodes n ON n.id = (c.sid << {_SESSION_SHIFT}) | c.parent
    WHERE c.k < c.want
)
SELECT 0, s.depth, s.want, c.depth, c.body FROM s LEFT JOIN chain c
UNION ALL
SELECT 1, s.depth, s.want, s.through, n.body
FROM s LEFT JOIN nodes n ON n.id = (s.sid << {_SESSION_SHIFT}) | s.summary
WHERE s.shows AND (:count < 0 OR :count > s.above)
"""


# Search vectors (memvault.vectors): an index beside the chain, created when a store
# is first opened with an embedder, outside the versioned schema (dropping it loses
# nothing: `memvault reindex` rebuilds it). One float32 vector per text hash.
_VECTORS = (
    "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS vector_space (space TEXT NOT NULL)",
)

_MAX_IN = 64
_PARAMS = [f"({', '.join('?' * n)})" for n in range(_MAX_IN + 1)]
_JSON_IDS = "(SELECT value FROM json_each(?))"  # the ids of a larger batch, as JSON


def _ids_in(ids: Sequence[str]) -> tuple[str, Sequence[str]]:
    """The list ``msg_id IN`` is to test, and its arguments: the usual turn's ids bound
    one by one (cheaper than json_each), a larger batch's (past what a statement may
    bind) as one JSON array."""
    if len(ids) <= _MAX_IN:
        return _PARAMS[len(ids)], ids
    return _JSON_IDS, (json.dumps(list(ids)),)


def _snapshot(session_id: str, r: Sequence[Any]) -> Snapshot:
    return decoded(session_id, f"snapshot {r[0]!r}", lambda: Snapshot(
        r[0], r[1], r[2], r[3], r[4], utc(r[5]), bool(r[6]), r[7], r[8]))


def _event(session_id: str, r: Sequence[Any]) -> Event:
    return decoded(session_id, f"the event of version {r[0]}", lambda: Event(
        r[0], r[1], r[2], utc(r[3]), r[4], r[5], r[6], r[7], json_object(r[8])))


IDLE = 8  # the connections of ended threads a store keeps for the next new ones
_INHERITED: list[sqlite3.Connection] = []  # a fork's child: copies it could not close
_OPEN: weakref.WeakSet[SqliteBackend] = weakref.WeakSet()  # this process's open stores


class _Connections:
    """A store's connections: each lent to one thread until it ends, then kept idle
    (up to :data:`IDLE`) for the next new thread. A graph's executor makes new threads
    at every run: each would otherwise open a connection (0.2 ms, and its statements
    compiled again), and keep it until the store closes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.all: set[sqlite3.Connection] = set()  # lent or idle: close() closes them
        self.idle: list[sqlite3.Connection] = []
        self.pid = os.getpid()
        self.closed = False
        self.stuck = False  # a fork's child holding a copy it could not close

    def forked(self) -> None:
        """In a fork's child, before anything else runs: close the copies of the
        parent's connections, so that the child's own are the only ones SQLite
        counts. SQLite keeps one record of locks a file for the whole process, and
        the copies' record says the file's locks are held, which the child's kernel
        does not know: a connection opened beside them takes no lock, and the
        parent's close then finds itself the file's last user and deletes its WAL
        under the child's writes. A copy inside a transaction (another thread of the
        parent was in one at the fork) cannot be closed safely: rolling it back
        would change the WAL index the parent's thread is writing. The store then
        refuses to work in the child."""
        self.lock, self.pid = threading.Lock(), os.getpid()  # the old one may be held
        copies, self.all, self.idle = self.all, set(), []
        for db in copies:
            if db.in_transaction:
                _INHERITED.append(db)
                self.stuck = True
            else:
                db.close()

    def take(self) -> sqlite3.Connection | None:
        """An idle connection, or None (open one and :meth:`add` it)."""
        with self.lock:
            if self.closed:
                raise BackendUnavailableError("the store is closed")
            if self.stuck:
                raise ConfigurationError(
                    "this process was forked while another thread was inside a SQLite "
                    "transaction on this store: SQLite connections cannot cross a fork, "
                    "and that one could not be closed here; fork when no thread is "
                    "using the store, or use the 'spawn' start method")
            return self.idle.pop() if self.idle else None

    def add(self, db: sqlite3.Connection) -> None:
        with self.lock:
            self.all.add(db)

    def give_back(self, db: sqlite3.Connection) -> None:
        """The finalizer of a thread's :class:`_Lease`: keep its connection idle, or
        close it if the store is closed, enough are idle, or a transaction was left
        open on it (a read abandoned half way). One not in ``all`` was closed with the
        store or at a fork. In a fork's child, the parent's threads' leases go
        before :meth:`forked` runs: nothing to do, :meth:`forked` closes them."""
        if self.pid != os.getpid():
            return
        with self.lock:
            if db not in self.all:
                return
            if not self.closed and not db.in_transaction and len(self.idle) < IDLE:
                self.idle.append(db)
                return
            self.all.discard(db)
        db.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for db in self.all:
                db.close()
            self.all.clear()
            self.idle.clear()


def _forked() -> None:
    """In a fork's child: each open store drops its connections (:meth:`_Connections.
    forked`) and the forking thread's lease, so its next call opens its own."""
    for backend in list(_OPEN):
        backend._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _Lease:
    """Kept in a thread's locals only: when the thread ends, it goes, and its finalizer
    gives the thread's connection back (:meth:`_Connections.give_back`)."""

    __slots__ = ("__weakref__",)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY ("database is locked") or SQLITE_LOCKED ("database table is
    locked"): every message SQLite has for either says "locked"."""
    return "locked" in str(exc)


def _driver_error(exc: sqlite3.Error) -> BackendError:
    """memvault's error for a driver's.

    The message carries SQLite's extended code: "disk I/O error" alone does not say
    that a write failed (SQLITE_IOERR_WRITE, e.g. a file size limit).
    """
    if isinstance(exc, sqlite3.OperationalError) and _busy(exc):
        return BackendUnavailableError(f"SQLite database is locked: {exc}")
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+
    return BackendError(f"SQLite failed: {exc} ({name})" if name else f"SQLite failed: {exc}")


def _backfill(db: sqlite3.Connection) -> None:
    """Index the nodes a store written before the index holds. A summary is a node
    some summary pointer (of a session or a snapshot) reaches, or that summary's
    predecessors; an undone summary nobody points at any more is indexed as a
    message: it is hidden either way (it is on no chain)."""
    summaries: set[tuple[int, int]] = set()
    links = {(sid, node): parent for sid, node, parent in
             db.execute("SELECT sid, node, parent FROM nodes")}
    for sid, node in db.execute("SELECT sid, summary FROM sessions UNION "
                                "SELECT sid, summary FROM snapshots"):
        while node and (sid, node) in links and (sid, node) not in summaries:
            summaries.add((sid, node))
            node = links[(sid, node)]
    _index(db, ((_rowid(sid, node, (sid, node) in summaries), body) for sid, node, body in
                db.execute("SELECT sid, node, body FROM nodes")))


def _index(db: sqlite3.Connection, nodes: Iterable[tuple[int, str]]) -> None:
    """Add ``(rowid, body)`` nodes to the FTS5 index."""
    rows = iter(nodes)
    while batch := [(rowid, _stored_words(body)) for rowid, body in itertools.islice(rows, 500)]:
        db.executemany("INSERT INTO search (rowid, words) VALUES (?, ?)", batch)


def _stored_words(body: str) -> str:
    """The words of a stored body; none for one that cannot be read (reading it
    raises CorruptRecordError: the index need not say so too)."""
    try:
        return " ".join(body_words(body))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return ""


# the columns save writes (those that changed), in _SqliteTxn._saved's order
_SAVED = ("head", "depth", "base", "version", "next_node", "updated_at", "expires_at",
          "summary", "through", "pending")


# what save sets beside the changed columns: on a row created in the same transaction,
# its settled keys (their values follow the changed ones); on a settled row, the flag
_FRESH = ", page_version=?, page_length=?, page_updated=?, page_expires=?"
_FLAG = ", unsettled=1"


_DETAIL = json.JSONEncoder(ensure_ascii=False)  # an event's detail, as stored
# an event, its id the session's next
_LOG = (f"INSERT INTO events (sid, id, {_EVENT}) VALUES (?1, (SELECT ifnull(max(id), 0) + 1"
        " FROM events WHERE sid = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")


def _detail(detail: dict[str, object]) -> str:
    """An event's detail as stored: ``_DETAIL``'s text. The usual one, a count under
    one key of the engine's (an append's ``{"messages": 2}``), is formatted directly:
    the same text, without the encoder's 2 µs."""
    if len(detail) == 1:
        ((key, value),) = detail.items()
        if type(value) is int and key.isidentifier():  # nothing in it to escape
            return f'{{"{key}": {value}}}'
    return _DETAIL.encode(detail)


@functools.lru_cache(maxsize=64)
def _update(moved: tuple[bool, ...], also: str) -> str:
    """The UPDATE of the columns that ``moved`` (one flag a column of ``_SAVED``)."""
    columns = itertools.compress(_SAVED, moved)
    return f"UPDATE sessions SET {', '.join(f'{c}=?' for c in columns)}{also} WHERE sid=?"


_BEGIN = {mode: f"BEGIN {mode}" for mode in ("IMMEDIATE", "DEFERRED")}


class _Begin:
    """``BEGIN <mode>`` ... ``COMMIT``, or ``ROLLBACK`` if the block raises; the block
    gets ``txn``. A class, not a generator: every call of the engine enters one (two
    nested generator context managers cost 3 µs an append). BEGIN and COMMIT run on
    ``cursor`` if given (the connection's own: :meth:`SqliteBackend._connect`)."""

    __slots__ = ("_begin", "_db", "_run", "_txn")

    def __init__(self, db: sqlite3.Connection, mode: str, txn: Any = None,
                 cursor: sqlite3.Cursor | None = None) -> None:
        self._db, self._begin, self._txn = db, _BEGIN[mode], txn
        self._run = (db if cursor is None else cursor).execute

    def __enter__(self) -> Any:
        self._run(self._begin)
        return self._txn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            try:
                self._run("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:  # an I/O error or a full disk may have rolled it back
            self._db.execute("ROLLBACK")


class _Transaction(_Begin):
    """An engine's transaction (:meth:`SqliteBackend.transaction`): :class:`_Begin` with
    its primitives, the driver's errors raised as memvault's (:func:`_driver_error`)."""

    __slots__ = ()

    def __enter__(self) -> _SqliteTxn:
        try:
            self._run(self._begin)
        except sqlite3.Error as exc:
            raise _driver_error(exc) from exc
        txn: _SqliteTxn = self._txn
        return txn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            super().__exit__(kind, exc, tb)
        except sqlite3.Error as err:
            raise _driver_error(err) from err
        if isinstance(exc, sqlite3.Error):
            raise _driver_error(exc) from exc


_INSERT_NODE = ("INSERT INTO nodes (id, sid, node, parent, depth, msg_id, body)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)")
_ROW_COLUMNS = len(_ROW.split(","))


@functools.lru_cache(maxsize=8)
def _live_ids(count: int) -> str:
    """The session row, then which of ``count`` message ids (bound first, then the
    session id; past :data:`_MAX_IN`, one JSON array: :func:`_ids_in`) it stores.
    Up to :data:`_MAX_IN` ids, one row: a column for each id, its own look-up in
    ``nodes_msg_id`` (the id, or NULL if it is not stored): an ``IN`` list joined
    instead makes SQLite build a temporary table of the ids in every append (the
    statement of a 2-message turn 6.1-6.3 -> 4.7-5.8 µs, timeit; 445,934 -> 423,514
    instructions an append). Past that, the session row once for each stored id
    after it (once with NULL after it if there is none)."""
    columns = ", ".join(f"s.{c.strip()}" for c in _ROW.split(","))
    if count > _MAX_IN:
        return (f"SELECT {columns}, n.msg_id FROM sessions s LEFT JOIN nodes n"
                f" ON n.sid = s.sid AND n.msg_id IN {_JSON_IDS} WHERE s.name = ?")
    found = "".join(", (SELECT msg_id FROM nodes WHERE sid = s.sid AND msg_id = ?)"
                    for _ in range(count))
    return f"SELECT {columns}{found} FROM sessions s WHERE s.name = ?"


class _SqliteTxn:
    def __init__(self, db: sqlite3.Connection, cursor: sqlite3.Cursor,
                 lagging: bool = False) -> None:
        self._db = db
        self._cursor = cursor  # for the statements an append makes (SqliteBackend._connect)
        # lagging: the search index lags behind (a search could not index the
        # pending messages), so matches ranks those itself (sqlite_lag), read once
        self._lagging = lagging
        self._lag: dict[int, Counter[str]] | None = None
        # each session's pending (the first node not in the search index, 0: none),
        # and its row's saved columns as stored (loaded, created or saved); whether
        # its row is unsettled (None: created in this transaction)
        self._pending: dict[int, int] = {}
        self._stored: dict[int, tuple[Any, ...]] = {}
        self._unsettled: dict[int, bool | None] = {}

    def _one(self, sql: str, *args: Any) -> Any:
        return self._db.execute(sql, args).fetchone()

    def _saved(self, row: Row) -> tuple[Any, ...]:
        assert isinstance(row.key, int)
        return (row.head, row.depth, row.base, row.version, row.next_node, row.updated_at,
                row.expires_at, row.summary, row.through, self._pending[row.key])

    def _row(self, r: tuple[Any, ...]) -> Row:
        """The Row of a row of ``_ROW``'s columns, noted as stored."""
        self._pending[r[0]] = r[12]
        self._unsettled[r[0]] = bool(r[13])
        self._stored[r[0]] = r[2:7] + r[8:13]  # what _saved makes of it, sliced
        return Row(*r[:12])

    def load(self, name: str) -> Row | None:
        r = self._one(_LOAD, name)
        return self._row(r) if r else None

    def create(self, name: str, now: float) -> Row:
        cur = self._db.execute(
            "INSERT INTO sessions (name, head, depth, base, version, next_node, created_at,"
            " updated_at, page_updated) VALUES (?, 0, 0, 0, 0, 1, ?, ?, ?)", (name, now, now, now))
        assert cur.lastrowid is not None
        self._pending[cur.lastrowid] = 0
        self._unsettled[cur.lastrowid] = None
        row = Row(cur.lastrowid, name, 0, 0, 0, 0, 1, now, now, None)
        self._stored[cur.lastrowid] = self._saved(row)
        return row

    def save(self, row: Row) -> None:
        """Sets only the columns that changed (pending too: :meth:`chain_on` and
        :meth:`insert_nodes` move it; the engine saves the row after inserting nodes).
        SQLite rewrites an index whenever the statement sets a column of its key, to
        the same value or not: an append then writes no index entry but
        sessions_pending's after a search, and sessions_unsettled's on the first write
        after a settle (schema 7).

        A row created in this transaction gets its settled keys with it (its index
        entries are being written anyway). A settled row is flagged unsettled; when
        that makes more than :data:`SETTLE_AT` of them, they are all settled: one
        transaction in that many rewrites their paging index entries."""
        saved = self._saved(row)
        assert isinstance(row.key, int)
        stored, self._stored[row.key] = self._stored[row.key], saved
        moved = tuple(map(operator.ne, saved, stored))
        if True not in moved:
            return
        values = list(itertools.compress(saved, moved))
        unsettled = self._unsettled[row.key]
        if unsettled is None:
            also = _FRESH
            values += [row.version, row.view, row.updated_at,
                       NEVER if row.expires_at is None else row.expires_at]
        else:  # the flag is not noted here: a settle may clear it in this transaction
            also = "" if unsettled else _FLAG
        self._cursor.execute(_update(moved, also), (*values, row.key))
        if also == _FLAG and self._one(
                "SELECT count(*) FROM (SELECT 1 FROM sessions WHERE unsettled LIMIT ?)",
                SETTLE_AT + 1)[0] > SETTLE_AT:
            self._db.execute(f"UPDATE sessions SET {_SETTLED}, unsettled = 0 WHERE unsettled")

    def purge(self, row: Row) -> int:
        span = _span(row)
        nodes = self._db.execute("DELETE FROM nodes WHERE id BETWEEN ? AND ?", span).rowcount
        self._db.execute("DELETE FROM search WHERE rowid BETWEEN ? AND ?", span)
        for table in ("snapshots", "events", "sessions"):
            self._db.execute(f"DELETE FROM {table} WHERE sid = ?", (row.key,))
        return nodes

    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]:
        within, args = _ids_in(ids)
        cur = self._db.execute(f"SELECT msg_id FROM nodes WHERE sid = ? AND msg_id IN {within}",
                               (row.key, *args))
        return {r[0] for r in cur}

    def live_ids(self, name: str, ids: Sequence[str],
                 now: float) -> tuple[Row | None, set[str]]:
        """The live row of session ``name`` and which of ``ids`` it stores, in one
        statement (:meth:`load` and :meth:`stored_ids` were two: 8.7 µs an append)."""
        rows = self._cursor.execute(_live_ids(len(ids)), (*_ids_in(ids)[1], name)).fetchall()
        row = self._row(rows[0]) if rows else None
        if row is None or not row.live(now):
            return None, set()
        # After the row: one row, a column an id; several rows (a larger batch's), one
        # id each. Msg ids are never empty: what is not NULL there is a stored id.
        after = rows[0][_ROW_COLUMNS:] if len(rows) == 1 else [r[-1] for r in rows]
        return row, set(filter(None, after))

    def insert_nodes(self, row: Row, nodes: Sequence[Node], summary: bool = False) -> None:
        """Messages are left to the next search to index (the session's pending
        moves to the first of them if it was 0); a summary is indexed now, after the
        session's pending messages, so that pending never covers a summary."""
        sid = row.key
        assert isinstance(sid, int)
        first = _rowid(sid, 0)  # a node's rowid: first | node
        self._db.executemany(_INSERT_NODE, [(first | n.node, sid, *n) for n in nodes])
        pending = self._pending[sid]
        if summary:
            if pending:
                _index(self._db, self._db.execute(
                    "SELECT id, body FROM nodes WHERE id BETWEEN ? AND ?",
                    (_rowid(sid, pending), _rowid(sid, nodes[0].node) - 1)))
            _index(self._db, [(_rowid(sid, n.node, True), n.body) for n in nodes])
            self._pending[sid] = 0
        elif not pending and nodes:
            self._pending[sid] = nodes[0].node

    def chain_on(self, row: Row, items: Sequence[tuple[str, str]]) -> None:
        """Chain messages ``(msg_id, body)`` onto ``row``'s head, as
        :meth:`Engine._add_nodes` does, writing their rows as it goes: no
        :class:`Node` is made (a 2-message append, SQL stubbed out: 101,626 ->
        90,899 instructions)."""
        sid = row.key
        assert isinstance(sid, int)
        first, node, head, depth = _rowid(sid, 0), row.next_node, row.head, row.depth
        rows = []
        for msg_id, body in items:
            depth += 1
            rows.append((first | node, sid, node, head, depth, msg_id, body))
            head, node = node, node + 1
        self._cursor.executemany(_INSERT_NODE, rows)
        if rows and not self._pending[sid]:  # left to the next search, as insert_nodes
            self._pending[sid] = row.next_node
        row.head, row.depth, row.next_node = head, depth, node

    def node(self, row: Row, node: int) -> Node | None:
        assert isinstance(row.key, int)
        r = self._one("SELECT node, parent, depth, msg_id, body FROM nodes WHERE id = ?",
                      _rowid(row.key, node))
        return Node(*r) if r else None

    def find(self, row: Row, msg_id: str) -> Node | None:
        r = self._one("SELECT node, parent, depth, msg_id, body FROM nodes"
                      " WHERE sid=? AND msg_id=?", row.key, msg_id)
        return Node(*r) if r else None

    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        cur = self._db.execute(_CHAIN, {"sid": row.key, "head": head, "count": count})
        return [Node(*r) for r in cur]

    def add_event(self, row: Row, event: Event) -> None:
        e = event
        self.log(row, e.version, e.op, e.writer, e.at.timestamp(), e.head_before,
                 e.base_before, e.head_after, e.base_after, e.detail)

    def log(self, row: Row, version: int, op: str, writer: str, at: float, head_before: int,
            base_before: int, head_after: int, base_after: int,
            detail: dict[str, object]) -> None:
        """:meth:`add_event` of an event's fields (``at``: epoch seconds): the engine's
        writes log through this without building an :class:`Event`."""
        self._cursor.execute(_LOG, (row.key, version, op, writer, at, head_before, base_before,
                                head_after, base_after, _detail(detail)))

    def events(self, row: Row) -> list[Event]:
        cur = self._db.execute(f"SELECT {_EVENT} FROM events WHERE sid = ? ORDER BY id",
                               (row.key,))
        return [_event(row.name, r) for r in cur]

    def drop_events(self, row: Row, keep_last: int) -> int:
        return self._db.execute(
            "DELETE FROM events WHERE sid = ? AND id NOT IN"
            " (SELECT id FROM events WHERE sid = ? ORDER BY id DESC LIMIT ?)",
            (row.key, row.key, keep_last)).rowcount

    def get_snapshot(self, row: Row, name: str) -> Snapshot | None:
        r = self._one(f"SELECT {_SNAP} FROM snapshots WHERE sid = ? AND name = ?", row.key, name)
        return _snapshot(row.name, r) if r else None

    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None:
        s = snapshot
        self._db.execute(
            f"INSERT INTO snapshots (sid, {_SNAP}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.key, s.name, s.head, s.base, s.version, s.length, s.created_at.timestamp(),
             int(s.auto), s.summary, s.through))

    def snapshots(self, row: Row) -> list[Snapshot]:
        cur = self._db.execute(
            f"SELECT {_SNAP} FROM snapshots WHERE sid = ? ORDER BY rowid", (row.key,))
        return [_snapshot(row.name, r) for r in cur]

    def rows(self) -> list[Row]:
        return [self._row(r) for r in self._db.execute(f"SELECT {_ROW} FROM sessions")]

    def links(self, row: Row) -> dict[int, tuple[int, int]]:
        cur = self._db.execute("SELECT node, parent, depth FROM nodes WHERE id BETWEEN ? AND ?",
                               _span(row))
        return {r[0]: (r[1], r[2]) for r in cur}

    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None:
        assert isinstance(row.key, int)
        self._db.executemany(
            "DELETE FROM nodes WHERE id = ?", [(_rowid(row.key, n),) for n in nodes])
        rowids = [(_rowid(row.key, n, False), _rowid(row.key, n, True)) for n in nodes]
        self._db.executemany("DELETE FROM search WHERE rowid IN (?, ?)", rowids)

    def matches(self, row: Row | None, terms: Sequence[str]
                ) -> Iterator[tuple[int | str, int, bool, float]]:
        if self._lagging:  # scored as they will be once the pending messages are indexed
            if self._lag is None:
                self._lag = {rowid: Counter(_stored_words(body).split())
                             for rowid, body in self._db.execute(_PENDING)}
            span = _span(row) if row is not None else (0, (1 << 63) - 1)
            found: Iterable[tuple[int, float]] = ranked(
                self._db, self._lag, span, terms, lambda term: _fts_query([term]))
        else:  # only rowid and score: any other column would be read for every match
            sql = "SELECT rowid, bm25(search) AS score FROM search WHERE search MATCH ?"
            args: tuple[object, ...] = (_fts_query(terms),)
            if row is not None:
                sql += " AND rowid BETWEEN ? AND ?"
                args += _span(row)
            # Ties by rowid (session, then node), as sqlite_lag.ranked and PostgreSQL
            # order them; FTS5 leaves the order of equal scores undefined.
            found = ((rowid, -score)
                     for rowid, score in self._db.execute(sql + " ORDER BY score, rowid", args))
        for rowid, score in found:
            yield (rowid >> _SESSION_SHIFT, rowid & (_SUMMARY_BIT - 1),
                   bool(rowid & _SUMMARY_BIT), score)

    def message_count(self, row: Row) -> int:
        """The session's messages in the index (rowids from its first, below the summary
        bit), and those not yet in it (nodes from pending on: never a summary)."""
        assert isinstance(row.key, int)
        first = _span(row)[0]
        count: int = self._one("SELECT count(*) FROM search WHERE rowid >= ? AND rowid < ?",
                               first, first | _SUMMARY_BIT)[0]
        pending = self._pending[row.key]
        if pending:
            count += self._one("SELECT count(*) FROM nodes WHERE id >= ? AND id < ?",
                               first | pending, first | row.next_node)[0]
        return count

    def ancestors(self, row: Row, head: int, count: int) -> list[int]:
        return [r[0] for r in self._db.execute(_ANCESTORS, (head, row.key, count))]

    def _has_vectors(self) -> bool:
        return self._one("SELECT 1 FROM sqlite_master WHERE name = 'vectors'") is not None

    def vector_space(self) -> str | None:
        r = self._one("SELECT space FROM vector_space") if self._has_vectors() else None
        return r[0] if r else None

    def set_vector_space(self, space: str, reset: bool) -> None:
        for statement in _VECTORS:
            self._db.execute(statement)
        if reset:
            self._db.execute("DELETE FROM vectors")
        self._db.execute("DELETE FROM vector_space")
        self._db.execute("INSERT INTO vector_space (space) VALUES (?)", (space,))

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys or not self._has_vectors():
            return {}
        cur = self._db.execute("SELECT key, vec FROM vectors WHERE key IN"
                               " (SELECT value FROM json_each(?))", (json.dumps(list(keys)),))
        return dict(cur.fetchall())

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._db.executemany("INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)", items)

    def vector_keys(self) -> list[str]:
        if not self._has_vectors():
            return []
        return [r[0] for r in self._db.execute("SELECT key FROM vectors")]

    def drop_vectors(self, keys: Sequence[str]) -> None:
        self._db.execute("DELETE FROM vectors WHERE key IN (SELECT value FROM json_each(?))",
                         (json.dumps(list(keys)),))

    def bodies(self, row: Row) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT body FROM nodes WHERE id BETWEEN ? AND ?",
                                               _span(row))]


class SqliteBackend(IndexedEngine):
    """A SQLite database file shared by any number of threads and processes.

    Args:
        path: the database file (created if missing; its folder must exist).
        durability: ``"full"`` (fsync every commit) or ``"normal"``.
        busy_timeout: seconds a writer waits for the lock before
            :class:`~memvault.errors.BackendUnavailableError`.
        mode: ``"rwc"`` (default: read, write, create the file) or ``"ro"``: read
            only, never creating or changing a file (a missing one is "no such store").
    """

    def __init__(self, path: str, durability: str = "full", busy_timeout: float = 30.0,
                 mode: str = "rwc") -> None:
        if durability not in ("full", "normal"):
            raise ConfigurationError(f"durability must be 'full' or 'normal', not {durability!r}")
        if mode not in ("rwc", "ro"):
            raise ConfigurationError(f"mode must be 'rwc' or 'ro', not {mode!r}")
        check_seconds("busy_timeout", busy_timeout, zero_ok=True)
        if mode == "ro" and not os.path.isfile(path):
            raise ConfigurationError(f"no such store: {path!r} does not exist")
        self.path = path
        self._read_only = mode == "ro"
        self._target = f"file:{quote(path)}?mode=ro" if self._read_only else path
        self._synchronous = durability.upper()
        self._busy_ms = int(busy_timeout * 1000)
        self._local = threading.local()
        self._connections = _Connections()
        _OPEN.add(self)
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            return db
        db = self._connections.take()
        if db is None:
            try:
                try:
                    db = self._open(self._target)
                except sqlite3.OperationalError as exc:
                    if not (self._read_only
                            and exc.sqlite_errorcode == sqlite3.SQLITE_CANTOPEN):
                        raise
                    self._target = self._immutable()
                    db = self._open(self._target)
            except (sqlite3.Error, ValueError) as exc:  # ValueError: a NUL in the path
                raise ConfigurationError(
                    f"cannot open SQLite database {self.path!r}: {exc}") from exc
            self._connections.add(db)
        self._local.lease = _Lease()
        weakref.finalize(self._local.lease, self._connections.give_back,
                         db).atexit = False  # at exit, the process's end closes them
        self._local.lagging = False  # read at every transaction: never missing
        # The statements of an append (BEGIN, the session read, the node rows, the
        # session update, the event, COMMIT) run on one cursor kept with the
        # connection: Connection.execute makes a cursor for each (0.1-0.3 µs a
        # statement). Each is done with when it returns (no rows, or all fetched),
        # so the next never cuts one short.
        self._local.cursor = db.cursor()
        self._local.db = db
        return db

    def _forked(self) -> None:
        """In a fork's child (:func:`_forked`)."""
        self._connections.forked()
        self._local = threading.local()  # the forking thread's connection was a copy

    def _open(self, target: str) -> sqlite3.Connection:
        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                             timeout=self._busy_ms / 1000, uri=self._read_only)
        try:
            db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            db.execute(f"PRAGMA synchronous = {self._synchronous}")  # reads the file
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _immutable(self) -> str:
        """The URI that reads a WAL database whose folder is read-only. SQLite reads
        WAL through a ``-shm`` file it cannot create there; with no write-ahead log
        left (a store closed cleanly merges and removes it), the file alone holds
        everything, and is read as immutable (no locks, no ``-shm``). A log that still
        holds changes would be ignored that way, so it is refused instead."""
        wal = f"{self.path}-wal"
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            raise ConfigurationError(
                f"cannot read {self.path!r} read-only: its folder is read-only and "
                f"{os.path.basename(wal)!r} holds changes not yet merged into it (SQLite "
                "needs a -shm file beside it to read them): open it once where it is "
                "writable, or copy the folder somewhere writable")
        return f"{self._target}&immutable=1"

    def _migrate(self) -> None:
        """Bring the schema up to date. A store that is up to date already is opened
        without the write lock (and without writing), so readers never wait for a
        writer; read-only (``mode=ro``), an older schema is refused."""
        try:
            db = self._connect()
            if self._schema(db) == SCHEMA_VERSION:
                return
            if self._read_only:
                raise ConfigurationError(
                    f"{self.path!r} has schema {self._schema(db)}, not {SCHEMA_VERSION}: open "
                    "it read-write once to upgrade it")
            self._to_wal(db)
            with _Begin(db, "IMMEDIATE"):  # then the schema is read again, locked
                for version in range(self._schema(db) + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version].split(";"):
                        if statement.strip():
                            db.execute(statement)
                    if version == 4:
                        _backfill(db)
                    if version == 6:
                        _index(db, db.execute(_NOTED))
                        db.execute("DROP TABLE search_pending")
                    db.execute(f"PRAGMA user_version = {version}")
        except sqlite3.DatabaseError as exc:
            self.close()
            if isinstance(exc, sqlite3.OperationalError) and _busy(exc):
                raise BackendUnavailableError(f"SQLite database is locked: {exc}") from exc
            raise ConfigurationError(f"{self.path!r} is not a usable SQLite database: {exc}") \
                from exc
        except (BackendError, ConfigurationError):
            self.close()
            raise

    def _to_wal(self, db: sqlite3.Connection) -> None:
        """Switch the file to WAL. SQLite does not wait for the lock that takes
        (``busy_timeout`` does not apply), so while another process creates the schema
        it fails at once with "database is locked": retry until ``busy_timeout``."""
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
        if mode.lower() != "wal":
            raise ConfigurationError(f"{self.path!r}: SQLite could not switch to WAL mode")

    def _schema(self, db: sqlite3.Connection) -> int:
        """The file's schema version; raises if a newer memvault wrote it."""
        current: int = db.execute("PRAGMA user_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise ConfigurationError(
                f"{self.path!r} was written by a newer memvault (schema {current}; this "
                f"version reads up to {SCHEMA_VERSION}): upgrade memvault")
        return current

    def transaction(self, write: bool) -> _Transaction:
        db = self._connect()
        cursor = self._local.cursor
        return _Transaction(db, "IMMEDIATE" if write else "DEFERRED",
                            _SqliteTxn(db, cursor, self._local.lagging), cursor)

    @staticmethod
    def _live_ids(txn: Txn, name: str, ids: Sequence[str],
                  now: float) -> tuple[Row | None, set[str]]:
        """One statement (:meth:`_SqliteTxn.live_ids`)."""
        return cast(_SqliteTxn, txn).live_ids(name, ids, now)

    @staticmethod
    def _add_nodes(txn: Txn, row: Row, items: Sequence[tuple[str, str]]) -> None:
        """Without nodes (:meth:`_SqliteTxn.chain_on`)."""
        cast(_SqliteTxn, txn).chain_on(row, items)

    @staticmethod
    def _log(txn: Txn, row: Row, op: str, w: Write, before: tuple[int, int],
             detail: dict[str, object]) -> None:
        cast(_SqliteTxn, txn).log(row, row.version, op, w.writer, w.now, *before, row.head,
                                  row.base, detail)

    def _query(self, sql: str, args: Sequence[Any] | dict[str, Any]) -> list[Any]:
        """The rows of one statement, outside any transaction: a single statement reads
        one consistent snapshot by itself (BEGIN and COMMIT would be two more round trips)."""
        db = self._connect()
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise _driver_error(exc) from exc

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        """The engine's info as one statement (:meth:`_query`)."""
        rows = self._query(_LOAD, (session_id,))
        row = Row(*rows[0][:12]) if rows else None
        return row.info() if row is not None and row.live(now) else None

    def history(self, session_id: str, last: int | None, now: float,
                full: bool = False) -> list[Stored]:
        """The engine's context view as one statement: a single statement reads one
        consistent snapshot, so it needs no transaction (four round trips saved); the
        full view of a linear session too (``_FULL_LINEAR``)."""
        if full:
            rows = self._query(_FULL_LINEAR, {"name": session_id, "now": now})
            if not rows:
                return []
            length, linear = rows[0][0], rows[0][1]
            nodes = sorted(rows[1:])  # by node: their first two columns are NULL
            if not linear or len(nodes) != length:  # not linear, or a node is missing
                return super().history(session_id, last, now, full)
            out = [(r[3], r[4]) for r in nodes]
            return out if last is None else out[len(out) - min(last, len(out)):]
        rows = self._query(_HISTORY, {"name": session_id, "now": now,
                                      "count": -1 if last is None else last})
        if not rows:
            return []
        chain = [r for r in rows if r[0] == 0]
        top, want = chain[0][1], chain[0][2]
        if chain[0][3] is None:
            chain = []
        check_chain(session_id, [r[3] for r in chain], top, want)
        out = [(r[3], r[4]) for r in reversed(chain)]
        for _, _, _, through, body in (r for r in rows if r[0] == 1):  # the summary
            if body is None:
                raise message_missing(session_id, through)
            out.insert(0, (through, body))
        return out

    def search(self, session_ids: Sequence[str] | None, terms: Sequence[str], k: int,
               include_hidden: bool, now: float) -> list[Match]:
        """Index the messages appended since the last search (one short write
        transaction, only when there are any: sessions_pending lists the sessions),
        then search. When it cannot write them at once (a read-only store, or
        another connection holds the write lock), the search ranks them itself
        beside the index, exactly as it will once they are indexed
        (:mod:`~memvault.backends.sqlite_lag`), and the next search indexes them."""
        db = self._connect()
        try:
            if db.execute("SELECT EXISTS (SELECT 1 FROM sessions WHERE pending <> 0)"
                          ).fetchone()[0] and not self._index_at_once(db):
                self._local.lagging = True
        except sqlite3.Error as exc:
            raise _driver_error(exc) from exc
        try:
            return super().search(session_ids, terms, k, include_hidden, now)
        finally:
            self._local.lagging = False

    def _index_at_once(self, db: sqlite3.Connection) -> bool:
        """Index the pending messages if the write lock can be had without waiting;
        False (nothing written) if it cannot: a read-only store, or another
        connection holds it (a search is a read: it never waits for a writer)."""
        if self._read_only:
            return False
        db.execute("PRAGMA busy_timeout = 0")
        try:
            with _Begin(db, "IMMEDIATE"):
                _index(db, db.execute(_PENDING))
                db.execute("UPDATE sessions SET pending = 0 WHERE pending <> 0")
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            return False
        finally:
            db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        return True

    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        """One statement (:func:`page_sql`)."""
        rows = self._query(*page_sql(query, now))
        return [(SessionInfo(r[0], r[1], r[2], utc(r[3]), utc(r[4]), to_datetime(r[5]), r[6]),
                 r[7]) for r in rows]

    def close(self) -> None:
        _OPEN.discard(self)
        self._connections.close()
        self._local = threading.local()


def page_sql(query: PageQuery, now: float) -> tuple[str, list[Any]]:
    """The statement that reads ``query``'s page, and its arguments. By id: one
    indexed range scan of the names after the cursor, skipping expired rows (compact
    removes them) and names without ``match`` (a rare match makes the scan go
    further). By a key, the same scan of that key's index for the settled rows
    (skipping the unsettled ones: :data:`SETTLE_AT` at most), merged with the
    unsettled rows (sessions_unsettled), compared on their live keys. A settled row's
    keys are its live ones: reporting them in the index's order spares the merge a
    sort."""
    sign, way = ("<", "DESC") if query.descending else (">", "ASC")
    live, settled = _KEYS.get(query.order, ("NULL", "NULL"))

    def scan(key: str, index: str = "", *rows: str) -> tuple[str, list[Any]]:
        where, args = [*rows, "(expires_at IS NULL OR expires_at > ?)"], list[Any]([now])
        if query.match:
            where.append("instr(name, ?) > 0")
            args.append(query.match)
        if query.after is not None:
            where.append(f"name {sign} ?" if key == "NULL" else f"({key}, name) {sign} (?, ?)")
            args += list(query.after[key == "NULL":])
        order = f"name {way}" if key == "NULL" else f"{key} {way}, name {way}"
        return (f"SELECT {_LISTED}, {key} FROM sessions {index} WHERE {' AND '.join(where)} "
                f"ORDER BY {order} LIMIT ?", [*args, query.limit])

    if query.order == "id":
        return scan("NULL")
    first, first_args = scan(settled, f"INDEXED BY sessions_by_{query.order}", "NOT unsettled")
    second, second_args = scan(live, "INDEXED BY sessions_unsettled", "unsettled")
    return (f"SELECT * FROM ({first}) UNION ALL SELECT * FROM ({second}) "
            f"ORDER BY 8 {way}, 1 {way} LIMIT ?", [*first_args, *second_args, query.limit])


# The options of a SQLite store, and how to read their text in a URL's query.
OPTIONS: dict[str, Callable[[str], Any]] = {"durability": str, "busy_timeout": float,
                                             "mode": str}
READ_ONLY = {"mode": "ro"}
"""The options that open a store read-only (what ``memvault``'s read commands pass)."""


def open_backend(url: str, **options: Any) -> Backend:
    """Open ``sqlite:///relative.db`` or ``sqlite:////abs/path.db``.

    The options may also be given in the URL's query, e.g.
    ``sqlite:///agent.db?durability=normal&busy_timeout=5&mode=ro``; keywords win. Anything
    else after the path (another parameter, a fragment) is refused rather than taken
    as part of the file name.
    """
    prefix = "sqlite:///"
    path, _, query = url[len(prefix):].partition("?")
    if not url.lower().startswith(prefix) or not path or "#" in url:
        raise ConfigurationError(
            f"a SQLite URL is sqlite:///relative.db or sqlite:////abs/path.db (with "
            f"?durability=...&busy_timeout=... if wanted), not {redact(url)!r}")
    given = read_options(url, query, OPTIONS, options, backend="SQLite")
    return SqliteBackend(path, **given.merged)
