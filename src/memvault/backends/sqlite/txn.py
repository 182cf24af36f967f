"""The SQLite backend's transactions: ``BEGIN`` ... ``COMMIT`` around the engine's
primitives (:class:`SqliteTxn`), and the driver's errors as memvault's."""

from __future__ import annotations

import functools
import itertools
import json
import operator
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from memvault.backends.engine.core import Node, Row
from memvault.backends.records import decoded, json_object
from memvault.backends.sqlite.connections import Connections, WriteGate
from memvault.backends.sqlite.lag import ranked
from memvault.backends.sqlite.schema import (
    ANCESTORS,
    CHAIN,
    EVENT,
    JSON_IDS,
    LOAD,
    MAX_IN,
    PENDING,
    ROW,
    SESSION_SHIFT,
    SETTLE_AT,
    SETTLED,
    SNAP,
    SUMMARY_BIT,
    VECTORS,
    fts_query,
    ids_in,
    index_bodies,
    rowid_of,
    span_of,
    stored_words,
)
from memvault.errors import BackendError, BackendUnavailableError
from memvault.model import Event, Snapshot, utc
from memvault.paging import NEVER


def snapshot_of(session_id: str, r: Sequence[Any]) -> Snapshot:
    return decoded(
        session_id,
        f"snapshot {r[0]!r}",
        lambda: Snapshot(r[0], r[1], r[2], r[3], r[4], utc(r[5]), bool(r[6]), r[7], r[8]),
    )


def event_of(session_id: str, r: Sequence[Any]) -> Event:
    return decoded(
        session_id,
        f"the event of version {r[0]}",
        lambda: Event(r[0], r[1], r[2], utc(r[3]), r[4], r[5], r[6], r[7], json_object(r[8])),
    )


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY ("database is locked") or SQLITE_LOCKED ("database table is
    locked"): every message SQLite has for either says "locked"."""
    return "locked" in str(exc)


def driver_error(exc: sqlite3.Error) -> BackendError:
    """memvault's error for a driver's.

    The message carries SQLite's extended code: "disk I/O error" alone does not say
    that a write failed (SQLITE_IOERR_WRITE, e.g. a file size limit).
    """
    if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
        return BackendUnavailableError(f"SQLite database is locked: {exc}")
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+
    return BackendError(f"SQLite failed: {exc} ({name})" if name else f"SQLite failed: {exc}")


# the columns save writes (those that changed), in SqliteTxn._saved's order
_SAVED = (
    "head",
    "depth",
    "base",
    "version",
    "next_node",
    "updated_at",
    "expires_at",
    "summary",
    "through",
    "pending",
)


# what save sets beside the changed columns: on a row created in the same transaction,
# its settled keys (their values follow the changed ones); on a settled row, the flag
_FRESH = ", page_version=?, page_length=?, page_updated=?, page_expires=?"
_FLAG = ", unsettled=1"


_DETAIL = json.JSONEncoder(ensure_ascii=False)  # an event's detail, as stored
# an event, its id the session's next
_LOG = (
    f"INSERT INTO events (sid, id, {EVENT}) VALUES (?1, (SELECT ifnull(max(id), 0) + 1"
    " FROM events WHERE sid = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
)


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


class Begin:
    """``BEGIN <mode>`` ... ``COMMIT``, or ``ROLLBACK`` if the block raises; the block
    gets ``txn``. A class, not a generator: every call of the engine enters one (two
    nested generator context managers cost 3 µs an append). BEGIN and COMMIT run on
    ``cursor`` if given (the connection's own: :meth:`SqliteBackend._connect`)."""

    __slots__ = ("_begin", "_db", "_run", "_txn")

    def __init__(
        self,
        db: sqlite3.Connection,
        mode: str,
        txn: Any = None,
        cursor: sqlite3.Cursor | None = None,
    ) -> None:
        self._db, self._begin, self._txn = db, _BEGIN[mode], txn
        self._run = (db if cursor is None else cursor).execute

    def __enter__(self) -> Any:
        self._run(self._begin)
        return self._txn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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


class Transaction(Begin):
    """An engine's transaction (:meth:`SqliteBackend.transaction`): :class:`Begin` with
    its primitives, the driver's errors raised as memvault's (:func:`driver_error`),
    the connection marked in use while it runs (:meth:`Connections.enter`), and a
    write begun only through the file's :class:`WriteGate` (waiting up to ``wait``
    seconds there), held until it ends."""

    __slots__ = ("_conns", "_gate", "_wait")

    def __init__(
        self,
        db: sqlite3.Connection,
        txn: SqliteTxn,
        cursor: sqlite3.Cursor,
        conns: Connections,
        gate: WriteGate | None,
        wait: float,
    ) -> None:
        super().__init__(db, "DEFERRED" if gate is None else "IMMEDIATE", txn, cursor)
        self._conns, self._gate, self._wait = conns, gate, wait

    def __enter__(self) -> SqliteTxn:
        self._conns.enter(self._db)
        try:
            if self._gate is not None:
                self._gate.enter(self._wait)
            try:
                self._run(self._begin)
            except BaseException:
                if self._gate is not None:
                    self._gate.leave()
                raise
        except BaseException as exc:
            self._conns.leave(self._db)
            if isinstance(exc, sqlite3.Error):
                raise driver_error(exc) from exc
            raise
        txn: SqliteTxn = self._txn
        return txn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            super().__exit__(kind, exc, tb)
        except sqlite3.Error as err:
            raise driver_error(err) from err
        finally:
            if self._gate is not None:
                self._gate.leave()
            self._conns.leave(self._db)
        if isinstance(exc, sqlite3.Error):
            raise driver_error(exc) from exc


_INSERT_NODE = (
    "INSERT INTO nodes (id, sid, node, parent, depth, msg_id, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_ROW_COLUMNS = len(ROW.split(","))


@functools.lru_cache(maxsize=8)
def live_ids_sql(count: int) -> str:
    """The session row, then which of ``count`` message ids (bound first, then the
    session id; past :data:`MAX_IN`, one JSON array: :func:`ids_in`) it stores.
    Up to :data:`MAX_IN` ids, one row: a column for each id, its own look-up in
    ``nodes_msg_id`` (the id, or NULL if it is not stored): an ``IN`` list joined
    instead makes SQLite build a temporary table of the ids in every append (the
    statement of a 2-message turn 6.1-6.3 -> 4.7-5.8 µs, timeit; 445,934 -> 423,514
    instructions an append). Past that, the session row once for each stored id
    after it (once with NULL after it if there is none)."""
    columns = ", ".join(f"s.{c.strip()}" for c in ROW.split(","))
    if count > MAX_IN:
        return (
            f"SELECT {columns}, n.msg_id FROM sessions s LEFT JOIN nodes n"
            f" ON n.sid = s.sid AND n.msg_id IN {JSON_IDS} WHERE s.name = ?"
        )
    found = "".join(
        ", (SELECT msg_id FROM nodes WHERE sid = s.sid AND msg_id = ?)" for _ in range(count)
    )
    return f"SELECT {columns}{found} FROM sessions s WHERE s.name = ?"


class SqliteTxn:
    """The engine's primitives (:class:`~memvault.backends.engine.core.Txn`) on one
    connection, inside the transaction a :class:`Transaction` holds."""

    def __init__(
        self, db: sqlite3.Connection, cursor: sqlite3.Cursor, lagging: bool = False
    ) -> None:
        self._db = db
        self._cursor = cursor  # for the statements an append makes (SqliteBackend._connect)
        # lagging: the search index lags behind (a search could not index the
        # pending messages), so matches ranks those itself (lag.py), read once
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
        return (
            row.head,
            row.depth,
            row.base,
            row.version,
            row.next_node,
            row.updated_at,
            row.expires_at,
            row.summary,
            row.through,
            self._pending[row.key],
        )

    def _row(self, r: tuple[Any, ...]) -> Row:
        """The Row of a row of ``ROW``'s columns, noted as stored."""
        self._pending[r[0]] = r[12]
        self._unsettled[r[0]] = bool(r[13])
        self._stored[r[0]] = r[2:7] + r[8:13]  # what _saved makes of it, sliced
        return Row(*r[:12])

    def load(self, name: str) -> Row | None:
        r = self._one(LOAD, name)
        return self._row(r) if r else None

    def create(self, name: str, now: float) -> Row:
        cur = self._db.execute(
            "INSERT INTO sessions (name, head, depth, base, version, next_node, created_at,"
            " updated_at, page_updated) VALUES (?, 0, 0, 0, 0, 1, ?, ?, ?)",
            (name, now, now, now),
        )
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
            values += [
                row.version,
                row.view,
                row.updated_at,
                NEVER if row.expires_at is None else row.expires_at,
            ]
        else:  # the flag is not noted here: a settle may clear it in this transaction
            also = "" if unsettled else _FLAG
        self._cursor.execute(_update(moved, also), (*values, row.key))
        if (
            also == _FLAG
            and self._one(
                "SELECT count(*) FROM (SELECT 1 FROM sessions WHERE unsettled LIMIT ?)",
                SETTLE_AT + 1,
            )[0]
            > SETTLE_AT
        ):
            self._db.execute(f"UPDATE sessions SET {SETTLED}, unsettled = 0 WHERE unsettled")

    def purge(self, row: Row) -> int:
        span = span_of(row)
        nodes = self._db.execute("DELETE FROM nodes WHERE id BETWEEN ? AND ?", span).rowcount
        self._db.execute("DELETE FROM search WHERE rowid BETWEEN ? AND ?", span)
        for table in ("snapshots", "events", "sessions"):
            self._db.execute(f"DELETE FROM {table} WHERE sid = ?", (row.key,))
        return nodes

    def stored_ids(self, row: Row, ids: Sequence[str]) -> set[str]:
        within, args = ids_in(ids)
        cur = self._db.execute(
            f"SELECT msg_id FROM nodes WHERE sid = ? AND msg_id IN {within}", (row.key, *args)
        )
        return {r[0] for r in cur}

    def live_ids(self, name: str, ids: Sequence[str], now: float) -> tuple[Row | None, set[str]]:
        """The live row of session ``name`` and which of ``ids`` it stores, in one
        statement (:meth:`load` and :meth:`stored_ids` were two: 8.7 µs an append)."""
        rows = self._cursor.execute(live_ids_sql(len(ids)), (*ids_in(ids)[1], name)).fetchall()
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
        first = rowid_of(sid, 0)  # a node's rowid: first | node
        self._db.executemany(_INSERT_NODE, [(first | n.node, sid, *n) for n in nodes])
        pending = self._pending[sid]
        if summary:
            if pending:
                index_bodies(
                    self._db,
                    self._db.execute(
                        "SELECT id, body FROM nodes WHERE id BETWEEN ? AND ?",
                        (rowid_of(sid, pending), rowid_of(sid, nodes[0].node) - 1),
                    ),
                )
            index_bodies(self._db, [(rowid_of(sid, n.node, True), n.body) for n in nodes])
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
        first, node, head, depth = rowid_of(sid, 0), row.next_node, row.head, row.depth
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
        r = self._one(
            "SELECT node, parent, depth, msg_id, body FROM nodes WHERE id = ?",
            rowid_of(row.key, node),
        )
        return Node(*r) if r else None

    def find(self, row: Row, msg_id: str) -> Node | None:
        r = self._one(
            "SELECT node, parent, depth, msg_id, body FROM nodes WHERE sid=? AND msg_id=?",
            row.key,
            msg_id,
        )
        return Node(*r) if r else None

    def chain(self, row: Row, head: int, count: int) -> list[Node]:
        cur = self._db.execute(CHAIN, {"sid": row.key, "head": head, "count": count})
        return [Node(*r) for r in cur]

    def add_event(self, row: Row, event: Event) -> None:
        self.log(row, *event.fields())

    def log(
        self,
        row: Row,
        version: int,
        op: str,
        writer: str,
        at: float,
        head_before: int,
        base_before: int,
        head_after: int,
        base_after: int,
        detail: dict[str, object],
    ) -> None:
        """:meth:`add_event` of an event's fields (``at``: epoch seconds): the engine's
        writes log through this without building an :class:`Event`."""
        self._cursor.execute(
            _LOG,
            (
                row.key,
                version,
                op,
                writer,
                at,
                head_before,
                base_before,
                head_after,
                base_after,
                _detail(detail),
            ),
        )

    def events(self, row: Row) -> list[Event]:
        cur = self._db.execute(f"SELECT {EVENT} FROM events WHERE sid = ? ORDER BY id", (row.key,))
        return [event_of(row.name, r) for r in cur]

    def drop_events(self, row: Row, keep_last: int) -> int:
        return self._db.execute(
            "DELETE FROM events WHERE sid = ? AND id NOT IN"
            " (SELECT id FROM events WHERE sid = ? ORDER BY id DESC LIMIT ?)",
            (row.key, row.key, keep_last),
        ).rowcount

    def get_snapshot(self, row: Row, name: str) -> Snapshot | None:
        r = self._one(f"SELECT {SNAP} FROM snapshots WHERE sid = ? AND name = ?", row.key, name)
        return snapshot_of(row.name, r) if r else None

    def put_snapshot(self, row: Row, snapshot: Snapshot) -> None:
        s = snapshot
        self._db.execute(
            f"INSERT INTO snapshots (sid, {SNAP}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.key,
                s.name,
                s.head,
                s.base,
                s.version,
                s.length,
                s.created_at.timestamp(),
                int(s.auto),
                s.summary,
                s.through,
            ),
        )

    def snapshots(self, row: Row) -> list[Snapshot]:
        cur = self._db.execute(
            f"SELECT {SNAP} FROM snapshots WHERE sid = ? ORDER BY rowid", (row.key,)
        )
        return [snapshot_of(row.name, r) for r in cur]

    def rows(self) -> list[Row]:
        return [self._row(r) for r in self._db.execute(f"SELECT {ROW} FROM sessions")]

    def links(self, row: Row) -> dict[int, tuple[int, int]]:
        cur = self._db.execute(
            "SELECT node, parent, depth FROM nodes WHERE id BETWEEN ? AND ?", span_of(row)
        )
        return {r[0]: (r[1], r[2]) for r in cur}

    def delete_nodes(self, row: Row, nodes: Sequence[int]) -> None:
        assert isinstance(row.key, int)
        self._db.executemany(
            "DELETE FROM nodes WHERE id = ?", [(rowid_of(row.key, n),) for n in nodes]
        )
        rowids = [(rowid_of(row.key, n, False), rowid_of(row.key, n, True)) for n in nodes]
        self._db.executemany("DELETE FROM search WHERE rowid IN (?, ?)", rowids)

    def matches(
        self, row: Row | None, terms: Sequence[str]
    ) -> Iterator[tuple[int | str, int, bool, float]]:
        if self._lagging:  # scored as they will be once the pending messages are indexed
            if self._lag is None:
                self._lag = {
                    rowid: Counter(stored_words(body).split())
                    for rowid, body in self._db.execute(PENDING)
                }
            span = span_of(row) if row is not None else (0, (1 << 63) - 1)
            found: Iterable[tuple[int, float]] = ranked(
                self._db, self._lag, span, terms, lambda term: fts_query([term])
            )
        else:  # only rowid and score: any other column would be read for every match
            sql = "SELECT rowid, bm25(search) AS score FROM search WHERE search MATCH ?"
            args: tuple[object, ...] = (fts_query(terms),)
            if row is not None:
                sql += " AND rowid BETWEEN ? AND ?"
                args += span_of(row)
            # Ties by rowid (session, then node), as lag.ranked and PostgreSQL
            # order them; FTS5 leaves the order of equal scores undefined.
            found = (
                (rowid, -score)
                for rowid, score in self._db.execute(sql + " ORDER BY score, rowid", args)
            )
        for rowid, score in found:
            yield (
                rowid >> SESSION_SHIFT,
                rowid & (SUMMARY_BIT - 1),
                bool(rowid & SUMMARY_BIT),
                score,
            )

    def message_count(self, row: Row) -> int:
        """The session's messages in the index (rowids from its first, below the summary
        bit), and those not yet in it (nodes from pending on: never a summary)."""
        assert isinstance(row.key, int)
        first = span_of(row)[0]
        count: int = self._one(
            "SELECT count(*) FROM search WHERE rowid >= ? AND rowid < ?", first, first | SUMMARY_BIT
        )[0]
        pending = self._pending[row.key]
        if pending:
            count += self._one(
                "SELECT count(*) FROM nodes WHERE id >= ? AND id < ?",
                first | pending,
                first | row.next_node,
            )[0]
        return count

    def ancestors(self, row: Row, head: int, count: int) -> list[int]:
        return [r[0] for r in self._db.execute(ANCESTORS, (head, row.key, count))]

    def _has_vectors(self) -> bool:
        return self._one("SELECT 1 FROM sqlite_master WHERE name = 'vectors'") is not None

    def vector_space(self) -> str | None:
        r = self._one("SELECT space FROM vector_space") if self._has_vectors() else None
        return r[0] if r else None

    def set_vector_space(self, space: str, reset: bool) -> None:
        for statement in VECTORS:
            self._db.execute(statement)
        if reset:
            self._db.execute("DELETE FROM vectors")
        self._db.execute("DELETE FROM vector_space")
        self._db.execute("INSERT INTO vector_space (space) VALUES (?)", (space,))

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys or not self._has_vectors():
            return {}
        cur = self._db.execute(
            "SELECT key, vec FROM vectors WHERE key IN (SELECT value FROM json_each(?))",
            (json.dumps(list(keys)),),
        )
        return dict(cur.fetchall())

    def put_vectors(self, items: Sequence[tuple[str, bytes]]) -> None:
        self._db.executemany("INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)", items)

    def vector_keys(self) -> list[str]:
        if not self._has_vectors():
            return []
        return [r[0] for r in self._db.execute("SELECT key FROM vectors")]

    def drop_vectors(self, keys: Sequence[str]) -> None:
        self._db.execute(
            "DELETE FROM vectors WHERE key IN (SELECT value FROM json_each(?))",
            (json.dumps(list(keys)),),
        )

    def bodies(self, row: Row) -> list[str]:
        return [
            r[0]
            for r in self._db.execute(
                "SELECT body FROM nodes WHERE id BETWEEN ? AND ?", span_of(row)
            )
        ]
