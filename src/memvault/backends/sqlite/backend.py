"""The SQLite backend (``sqlite:///relative.db``, ``sqlite:////abs/path.db``).

WAL mode; every write is one ``BEGIN IMMEDIATE`` transaction, so writers from any
number of threads and processes are serialized by SQLite's own lock (waiting up to
``busy_timeout``); the threads of one process queue for it at the file's write gate
first (:class:`~memvault.backends.sqlite.connections.WriteGate`), so SQLite's busy
handler, which polls, only ever waits for other processes. Reads run in a deferred
transaction: one consistent snapshot. Each thread gets its own connection; when the
thread ends, the next new thread gets it (a few are kept idle; others are closed),
and a fork's child closes its copies of the parent's and opens its own
(:mod:`~memvault.backends.sqlite.connections`). The schema version lives in
``PRAGMA user_version``; a file written by a newer memvault is refused
(:mod:`~memvault.backends.sqlite.schema`: the file's layout and its upgrades;
:mod:`~memvault.backends.sqlite.txn`: the engine's primitives in a transaction).

Durability: ``durability="full"`` (default) fsyncs the WAL on every commit, so an
acknowledged write survives power loss; ``"normal"`` survives a process crash
but may lose the last commits on power loss (SQLite's ``synchronous=NORMAL``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast
from urllib.parse import quote

from memvault.backends.base import Backend, Match, Stored, Write
from memvault.backends.engine.core import Row, Txn, check_chain
from memvault.backends.engine.lexical import IndexedEngine
from memvault.backends.sqlite.connections import (
    Connections,
    Lease,
    WriteGate,
    forget,
    watch,
    write_gate,
)
from memvault.backends.sqlite.schema import (
    FULL_LINEAR,
    HISTORY,
    KEYS,
    LISTED,
    LOAD,
    MIGRATIONS,
    NOTED,
    PENDING,
    SCHEMA_VERSION,
    backfill,
    index_bodies,
)
from memvault.backends.sqlite.txn import Begin, SqliteTxn, Transaction, driver_error, is_busy
from memvault.backends.url import read_options, redact
from memvault.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigurationError,
    message_missing,
)
from memvault.model import SessionInfo, check_seconds, to_datetime, utc
from memvault.paging import Listed, PageQuery


class SqliteBackend(IndexedEngine):
    """A SQLite database file shared by any number of threads and processes.

    Args:
        path: the database file (created if missing; its folder must exist).
        durability: ``"full"`` (fsync every commit) or ``"normal"``.
        busy_timeout: seconds a writer waits for the lock before
            :class:`~memvault.errors.BackendUnavailableError`: up to that long behind
            this process's other writers, then up to that long behind other
            processes'.
        mode: ``"rwc"`` (default: read, write, create the file) or ``"ro"``: read
            only, never creating or changing a file (a missing one is "no such store").
    """

    def __init__(
        self, path: str, durability: str = "full", busy_timeout: float = 30.0, mode: str = "rwc"
    ) -> None:
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
        self._connections = Connections()
        watch(self)
        self._migrate()
        self._gate = self._write_gate()

    def _write_gate(self) -> WriteGate:
        """The file's gate (:func:`write_gate`); a gate of its own for a store whose
        file is gone (deleted under it: its writes fail in SQLite anyway)."""
        try:
            return write_gate(self.path)
        except OSError:
            return WriteGate()

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
                    if not (self._read_only and exc.sqlite_errorcode == sqlite3.SQLITE_CANTOPEN):
                        raise
                    self._target = self._immutable()
                    db = self._open(self._target)
            except (sqlite3.Error, ValueError) as exc:  # ValueError: a NUL in the path
                raise ConfigurationError(
                    f"cannot open SQLite database {self.path!r}: {exc}"
                ) from exc
            self._connections.add(db)
        self._local.lease = Lease()
        weakref.finalize(
            self._local.lease, self._connections.give_back, db
        ).atexit = False  # at exit, the process's end closes them
        self._local.lagging = False  # read at every transaction: never missing
        # The statements of an append (BEGIN, the session read, the node rows, the
        # session update, the event, COMMIT) run on one cursor kept with the
        # connection: Connection.execute makes a cursor for each (0.1-0.3 µs a
        # statement). Each is done with when it returns (no rows, or all fetched),
        # so the next never cuts one short.
        self._local.cursor = db.cursor()
        self._local.db = db
        return db

    def forked(self) -> None:
        """In a fork's child, before anything else runs there
        (:func:`~memvault.backends.sqlite.connections.watch`)."""
        self._connections.forked()
        self._local = threading.local()  # the forking thread's connection was a copy
        self._gate = self._write_gate()  # the parent's may be held by another thread

    def _open(self, target: str) -> sqlite3.Connection:
        db = sqlite3.connect(
            target,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._busy_ms / 1000,
            uri=self._read_only,
        )
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
                "writable, or copy the folder somewhere writable"
            )
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
                    "it read-write once to upgrade it"
                )
            self._to_wal(db)
            with Begin(db, "IMMEDIATE"):  # then the schema is read again, locked
                for version in range(self._schema(db) + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version].split(";"):
                        if statement.strip():
                            db.execute(statement)
                    if version == 4:
                        backfill(db)
                    if version == 6:
                        index_bodies(db, db.execute(NOTED))
                        db.execute("DROP TABLE search_pending")
                    db.execute(f"PRAGMA user_version = {version}")
        except sqlite3.DatabaseError as exc:
            self.close()
            if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
                raise BackendUnavailableError(f"SQLite database is locked: {exc}") from exc
            raise ConfigurationError(
                f"{self.path!r} is not a usable SQLite database: {exc}"
            ) from exc
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
                if not is_busy(exc) or time.monotonic() >= deadline:
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
                f"version reads up to {SCHEMA_VERSION}): upgrade memvault"
            )
        return current

    def transaction(self, write: bool) -> Transaction:
        db = self._connect()
        cursor = self._local.cursor
        return Transaction(
            db,
            SqliteTxn(db, cursor, self._local.lagging),
            cursor,
            self._connections,
            self._gate if write else None,
            self._busy_ms / 1000,
        )

    @staticmethod
    def _live_ids(
        txn: Txn, name: str, ids: Sequence[str], now: float
    ) -> tuple[Row | None, set[str]]:
        """One statement (:meth:`SqliteTxn.live_ids`)."""
        return cast(SqliteTxn, txn).live_ids(name, ids, now)

    @staticmethod
    def _add_nodes(txn: Txn, row: Row, items: Sequence[tuple[str, str]]) -> None:
        """Without nodes (:meth:`SqliteTxn.chain_on`)."""
        cast(SqliteTxn, txn).chain_on(row, items)

    @staticmethod
    def _log(
        txn: Txn, row: Row, op: str, w: Write, before: tuple[int, int], detail: dict[str, object]
    ) -> None:
        cast(SqliteTxn, txn).log(
            row, row.version, op, w.writer, w.now, *before, row.head, row.base, detail
        )

    def _query(self, sql: str, args: Sequence[Any] | dict[str, Any]) -> list[Any]:
        """The rows of one statement, outside any transaction: a single statement reads
        one consistent snapshot by itself (BEGIN and COMMIT would be two more round trips)."""
        db = self._connect()
        self._connections.enter(db)
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise driver_error(exc) from exc
        finally:
            self._connections.leave(db)

    def info(self, session_id: str, now: float) -> SessionInfo | None:
        """The engine's info as one statement (:meth:`_query`)."""
        rows = self._query(LOAD, (session_id,))
        row = Row(*rows[0][:12]) if rows else None
        return row.info() if row is not None and row.live(now) else None

    def history(
        self, session_id: str, last: int | None, now: float, full: bool = False
    ) -> list[Stored]:
        """The engine's context view as one statement: a single statement reads one
        consistent snapshot, so it needs no transaction (four round trips saved); the
        full view of a linear session too (``FULL_LINEAR``)."""
        if full:
            rows = self._query(FULL_LINEAR, {"name": session_id, "now": now})
            if not rows:
                return []
            length, linear = rows[0][0], rows[0][1]
            nodes = sorted(rows[1:])  # by node: their first two columns are NULL
            if not linear or len(nodes) != length:  # not linear, or a node is missing
                return super().history(session_id, last, now, full)
            out = [(r[3], r[4]) for r in nodes]
            return out if last is None else out[len(out) - min(last, len(out)) :]
        rows = self._query(
            HISTORY, {"name": session_id, "now": now, "count": -1 if last is None else last}
        )
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

    def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        """Index the messages appended since the last search (one short write
        transaction, only when there are any: sessions_pending lists the sessions),
        then search. When it cannot write them at once (a read-only store, or
        another connection holds the write lock), the search ranks them itself
        beside the index, exactly as it will once they are indexed
        (:mod:`~memvault.backends.sqlite.lag`), and the next search indexes them."""
        db = self._connect()
        self._connections.enter(db)
        try:
            try:
                if db.execute(
                    "SELECT EXISTS (SELECT 1 FROM sessions WHERE pending <> 0)"
                ).fetchone()[0] and not self._index_at_once(db):
                    self._local.lagging = True
            except sqlite3.Error as exc:
                raise driver_error(exc) from exc
            return super().search(session_ids, terms, k, include_hidden, now)
        finally:
            self._local.lagging = False
            self._connections.leave(db)

    def _index_at_once(self, db: sqlite3.Connection) -> bool:
        """Index the pending messages if the write lock can be had without waiting;
        False (nothing written) if it cannot: a read-only store, or another
        connection holds it (a search is a read: it never waits for a writer)."""
        if self._read_only or not self._gate.try_enter():
            return False
        db.execute("PRAGMA busy_timeout = 0")
        try:
            with Begin(db, "IMMEDIATE"):
                index_bodies(db, db.execute(PENDING))
                db.execute("UPDATE sessions SET pending = 0 WHERE pending <> 0")
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            return False
        finally:
            self._gate.leave()
            db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        return True

    def sessions_page(self, query: PageQuery, now: float) -> list[Listed]:
        """One statement (:func:`page_sql`)."""
        rows = self._query(*page_sql(query, now))
        return [
            (SessionInfo(r[0], r[1], r[2], utc(r[3]), utc(r[4]), to_datetime(r[5]), r[6]), r[7])
            for r in rows
        ]

    def close(self) -> None:
        forget(self)
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
    live, settled = KEYS.get(query.order, ("NULL", "NULL"))

    def scan(key: str, index: str = "", *rows: str) -> tuple[str, list[Any]]:
        where, args = [*rows, "(expires_at IS NULL OR expires_at > ?)"], list[Any]([now])
        if query.match:
            where.append("instr(name, ?) > 0")
            args.append(query.match)
        if query.after is not None:
            where.append(f"name {sign} ?" if key == "NULL" else f"({key}, name) {sign} (?, ?)")
            args += list(query.after[key == "NULL" :])
        order = f"name {way}" if key == "NULL" else f"{key} {way}, name {way}"
        return (
            f"SELECT {LISTED}, {key} FROM sessions {index} WHERE {' AND '.join(where)} "
            f"ORDER BY {order} LIMIT ?",
            [*args, query.limit],
        )

    if query.order == "id":
        return scan("NULL")
    first, first_args = scan(settled, f"INDEXED BY sessions_by_{query.order}", "NOT unsettled")
    second, second_args = scan(live, "INDEXED BY sessions_unsettled", "unsettled")
    return (
        f"SELECT * FROM ({first}) UNION ALL SELECT * FROM ({second}) "
        f"ORDER BY 8 {way}, 1 {way} LIMIT ?",
        [*first_args, *second_args, query.limit],
    )


# The options of a SQLite store, and how to read their text in a URL's query.
OPTIONS: dict[str, Callable[[str], Any]] = {"durability": str, "busy_timeout": float, "mode": str}
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
    path, _, query = url[len(prefix) :].partition("?")
    if not url.lower().startswith(prefix) or not path or "#" in url:
        raise ConfigurationError(
            f"a SQLite URL is sqlite:///relative.db or sqlite:////abs/path.db (with "
            f"?durability=...&busy_timeout=... if wanted), not {redact(url)!r}"
        )
    given = read_options(url, query, OPTIONS, options, backend="SQLite")
    return SqliteBackend(path, **given.merged)
