"""The PostgreSQL backend (``postgresql://``, ``postgres://``): psycopg 3 with a pool.

Every operation is one round trip: a call to a server-side function that runs
the whole operation in one transaction, serialized per session by a lock on the
session's row (see ``postgres/sql/``). The sync face uses
:class:`psycopg_pool.ConnectionPool`, the async face
:class:`psycopg_pool.AsyncConnectionPool`; they share every operation, written
without I/O as generators of statements with their arguments and result parsers
(:mod:`~memvault.backends.postgres.calls`, run by
:class:`~memvault.backends.driven.Driven`), and differ only in how a statement is
sent.

URL and options::

    postgresql://user:password@host:5432/dbname?sslmode=require&schema=agents

Every libpq parameter in the URL is honoured (``sslmode``, ``options``,
``connect_timeout``, ``application_name``, ...). ``schema`` (default
``memvault``) is memvault's own: it may be given in the URL or as an option and
is removed before the URL reaches libpq; so is ``prepared_statements``.
Options: ``schema``, ``min_size`` / ``max_size`` (pool connections, default 1
and 10), ``timeout`` (seconds to wait for a pooled connection, default 30),
``migrate`` (default True: opening applies missing migrations; False: opening
only checks the schema version) and ``prepared_statements`` (below).

``prepared_statements`` (default True; ``?prepared_statements=false`` in the URL,
or the keyword): False opens every pooled connection with psycopg's
``prepare_threshold=None``, so no statement is ever prepared server-side. Needed
behind PgBouncer in transaction mode before 1.21 (or without
``max_prepared_statements``): psycopg prepares a statement after its fifth run on
a connection, under a name numbered per client connection (``_pg3_0``, ...), and
PgBouncer hands each transaction whatever server connection is free. The next run
then fails ("prepared statement ... does not exist" / "already exists"), or worse,
finds the statement another client prepared under that name on that server
connection and runs it with these arguments: ``info`` can run ``delete``. That is
why it is an option and not a fallback after the first error: the errors come
after the damage. PgBouncer cannot be detected from a client connection (it
forwards ``SHOW`` and reports the server's parameters), so it is not guessed.

Opening the sync face connects, checks and migrates at once; the async face does
so on its first operation (opening it never blocks the event loop). A schema
newer than this code raises :class:`~memvault.errors.ConfigurationError`.

Storage: message bodies are ``text`` holding the codec's JSON envelope byte for
byte. Not ``jsonb``: JSON escapes NUL as ``\\u0000``, which ``jsonb`` rejects
(and ``jsonb`` reorders keys). Session ids, snapshot names, message ids and
writer labels are ``bytea`` (their UTF-8 bytes), since ``text`` cannot hold the
NUL they may contain. Times are the client's epoch seconds (``Write.now``).

Errors: a server that cannot be reached raises
:class:`~memvault.errors.BackendUnavailableError`; so does any server error that
rolled the statement back (lock or statement timeout, deadlock), since nothing
was applied. A connection lost after a write was sent raises
:class:`~memvault.errors.OutcomeUnknownError`: it may or may not have been
applied, and retrying an append with the same messages is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from memvault.backends.base import AsyncBackend, Backend, Match
from memvault.backends.driven import AsyncDriven, Driven, Op
from memvault.backends.postgres.calls import Call, Calls, failure, reason_of
from memvault.backends.postgres.migrations import (
    DEFAULT_SCHEMA,
    check_schema,
    latest,
    refusal,
    script,
)
from memvault.backends.url import (
    EVERY_PARAMETER,
    KEYWORD_ONLY,
    Parse,
    boolean,
    read_options,
    redact,
)
from memvault.errors import BackendUnavailableError, ConfigurationError, MemvaultError
from memvault.model import (
    check_seconds,
)
from memvault.sansio import drive, drive_async

__all__ = [
    "AsyncPostgresBackend",
    "MigrationResult",
    "PostgresBackend",
    "PostgresSettings",
    "migrate",
    "open_async_backend",
    "open_backend",
]

T = TypeVar("T")


@dataclass(frozen=True)
class PostgresSettings:
    """A PostgreSQL store's configuration, checked before any connection is made.

    Attributes:
        conninfo: the URL handed to libpq (memvault's ``schema`` parameter removed).
        schema: the schema holding memvault's tables and functions.
        min_size / max_size: pool size bounds.
        timeout: seconds to wait for a pooled connection.
        migrate: apply missing migrations when opening (else only check).
        prepared_statements: let psycopg prepare statements it runs often (False: never,
            for PgBouncer in transaction mode).
        where: the URL with its password redacted, for messages.
    """

    conninfo: str
    schema: str
    min_size: int
    max_size: int
    timeout: float
    migrate: bool
    prepared_statements: bool
    where: str


# The options of a PostgreSQL store; a URL's query sets only the schema and
# prepared_statements, properties of the deployment (its other parameters go to libpq).
OPTIONS: dict[str, Parse | None] = {
    "schema": str,
    "min_size": KEYWORD_ONLY,
    "max_size": KEYWORD_ONLY,
    "timeout": KEYWORD_ONLY,
    "migrate": KEYWORD_ONLY,
    "prepared_statements": boolean,
}


def settings(url: str, **options: Any) -> PostgresSettings:
    """Parse a ``postgresql://`` URL and the backend's options into :class:`PostgresSettings`."""
    base, _, query = url.partition("?")
    given = read_options(
        url, query, OPTIONS, options, backend="PostgreSQL", passed_on=EVERY_PARAMETER
    )
    url_schema, schema = given.from_url.get("schema"), given.keywords.get("schema")
    if url_schema is not None and schema is not None and url_schema != schema:
        raise ConfigurationError(
            f"{redact(url)}: the URL names schema {url_schema!r} and the option {schema!r}"
        )
    conninfo = base + ("?" + "&".join(given.passed_on) if given.passed_on else "")
    chosen = schema if schema is not None else url_schema
    return _settings(conninfo, redact(url), **{**given.merged, "schema": chosen})


def _settings(
    conninfo: str,
    where: str,
    schema: str | None = None,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 30.0,
    migrate: bool = True,
    prepared_statements: bool = True,
) -> PostgresSettings:
    for name, value, low in (("min_size", min_size, 0), ("max_size", max_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigurationError(f"{name} must be an integer >= {low}, not {value!r}")
    if max_size < min_size:
        raise ConfigurationError(f"max_size ({max_size}) is below min_size ({min_size})")
    check_seconds("timeout", timeout)
    for flag, given in (("migrate", migrate), ("prepared_statements", prepared_statements)):
        if not isinstance(given, bool):
            raise ConfigurationError(f"{flag} must be True or False, not {given!r}")
    name = check_schema(DEFAULT_SCHEMA if schema is None else schema)
    return PostgresSettings(
        conninfo, name, min_size, max_size, float(timeout), migrate, prepared_statements, where
    )


class MigrationResult(NamedTuple):
    """What :func:`migrate` found and left: schema versions before and after."""

    schema: str
    before: int
    after: int


def _connect_failure(exc: psycopg.Error, s: PostgresSettings) -> MemvaultError:
    # libpq gives no SQLSTATE for a refused login: every connect failure is "unavailable".
    return BackendUnavailableError(f"cannot connect to PostgreSQL at {s.where}: {reason_of(exc)}")


def _migration_failure(
    exc: psycopg.Error, s: PostgresSettings, conn: psycopg.BaseConnection[Any]
) -> MemvaultError:
    refused = refusal(exc.sqlstate or "", exc.diag.message_detail or "", s.schema, s.where)
    if refused is not None:
        return refused
    if conn.broken:
        return BackendUnavailableError(
            f"PostgreSQL at {s.where}: the connection was lost while migrating schema "
            f"{s.schema!r} (a migration is one transaction: open again to retry): "
            f"{reason_of(exc)}"
        )
    return ConfigurationError(
        f"PostgreSQL at {s.where}: cannot migrate schema {s.schema!r}: {reason_of(exc)}"
    )


def _version_before(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    """Move to the script's last result (the SELECT after the DO block)."""
    while cur.description is None and cur.nextset():
        pass


def _migrate(s: PostgresSettings, apply: bool) -> MigrationResult:
    try:
        conn = psycopg.connect(s.conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise _connect_failure(exc, s) from exc
    with conn:
        try:
            cur = conn.execute(script(s.schema, apply=apply))
            _version_before(cur)
            row = cur.fetchone()
        except psycopg.Error as exc:
            raise _migration_failure(exc, s, conn) from exc
    assert row is not None
    return MigrationResult(s.schema, row[0], latest())


async def _migrate_async(s: PostgresSettings, apply: bool) -> MigrationResult:
    try:
        conn = await psycopg.AsyncConnection.connect(s.conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise _connect_failure(exc, s) from exc
    async with conn:
        try:
            cur = await conn.execute(script(s.schema, apply=apply))
            _version_before(cur)
            row = await cur.fetchone()
        except psycopg.Error as exc:
            raise _migration_failure(exc, s, conn) from exc
    assert row is not None
    return MigrationResult(s.schema, row[0], latest())


def migrate(url: str, schema: str | None = None) -> MigrationResult:
    """Create or upgrade memvault's schema in the database ``url`` names.

    Safe to run from several processes at once (an advisory lock serializes them)
    and to repeat (only missing migrations run).

    Raises:
        ConfigurationError: bad URL or schema name, a schema newer than this code,
            or the server refused a migration (e.g. no CREATE privilege).
        BackendUnavailableError: the server cannot be reached.
    """
    return _migrate(settings(url, schema=schema), apply=True)


def _pool_failure(exc: psycopg.Error, s: PostgresSettings) -> MemvaultError:
    if isinstance(exc, PoolClosed):
        return BackendUnavailableError("the store is closed")
    return BackendUnavailableError(
        f"no connection to PostgreSQL at {s.where} within {s.timeout:g}s: {reason_of(exc)}"
    )


def _pool_args(s: PostgresSettings) -> dict[str, Any]:
    """The pool's arguments, the same for both faces (and a fork child's pool)."""
    connection: dict[str, Any] = {"autocommit": True}
    if not s.prepared_statements:
        connection["prepare_threshold"] = None
    return {
        "min_size": s.min_size,
        "max_size": s.max_size,
        "timeout": s.timeout,
        "kwargs": connection,
        "name": f"memvault:{s.schema}",
    }


_PARENTS: list[Any] = []  # a fork's child: the parent's pools (_own_pool)


class PostgresBackend(Driven):
    """The synchronous face: a :class:`psycopg_pool.ConnectionPool`, safe across threads."""

    _ops: Calls

    def __init__(self, s: PostgresSettings) -> None:
        self.settings = s
        self._ops = Calls(s.schema)
        _migrate(s, apply=s.migrate)
        self._pool = ConnectionPool(s.conninfo, open=True, **_pool_args(s))
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"PostgresBackend({self.settings.where!r}, schema={self.settings.schema!r})"

    def _own_pool(self) -> ConnectionPool:
        """In a fork's child: a pool of its own, not yet open. The parent's pool holds
        the parent's sockets: a request sent on one from here interleaves with the
        parent's ("prepared statement already exists"), and closing one ends the
        parent's session. So it is kept here, never used and never closed (psycopg
        closes a dropped connection only in the process that opened it)."""
        _PARENTS.append(self._pool)
        self._pool = ConnectionPool(self.settings.conninfo, open=False, **_pool_args(self.settings))
        self._pid = os.getpid()
        return self._pool

    def _run(self, operation: Op[T]) -> T:
        if self._pid != os.getpid():
            self._own_pool().open()
        return drive(operation, self._send)

    def _send(self, call: Call[T]) -> T:
        lost = False
        try:
            with self._pool.connection() as conn:
                try:
                    with conn.transaction() if call.checked else contextlib.nullcontext():
                        return call.parse(conn.execute(call.sql, call.params).fetchall())
                except psycopg.Error as exc:
                    lost = conn.broken
                    raise failure(exc, call, lost) from exc
        except (PoolTimeout, PoolClosed) as exc:
            raise _pool_failure(exc, self.settings) from exc
        finally:
            if lost:  # the server went away: drop the pool's other dead connections too,
                self._pool.check()  # so that the caller's retry gets a live one

    def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        return self._run(self._ops.search(session_ids, terms, k, include_hidden, now))

    def close(self) -> None:
        if self._pid != os.getpid():
            self._own_pool()
        self._pool.close()


class AsyncPostgresBackend(AsyncDriven):
    """The asyncio face: an :class:`psycopg_pool.AsyncConnectionPool`, opened (and the
    schema checked or migrated) on the first operation."""

    _ops: Calls

    def __init__(self, s: PostgresSettings) -> None:
        self.settings = s
        self._ops = Calls(s.schema)
        self._pool = AsyncConnectionPool(s.conninfo, open=False, **_pool_args(s))
        self._opening = asyncio.Lock()
        self._open = False
        self._closed = False
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"AsyncPostgresBackend({self.settings.where!r}, schema={self.settings.schema!r})"

    async def _start(self) -> None:
        async with self._opening:
            if self._closed:
                raise BackendUnavailableError("the store is closed")
            if not self._open:
                await _migrate_async(self.settings, apply=self.settings.migrate)
                await self._pool.open()
                self._open = True

    def _own_pool(self) -> None:
        """In a fork's child (as :meth:`PostgresBackend._own_pool`): a pool of its
        own, opened on the child's event loop at its first call."""
        _PARENTS.append(self._pool)
        self._pool = AsyncConnectionPool(
            self.settings.conninfo, open=False, **_pool_args(self.settings)
        )
        self._opening, self._open, self._pid = asyncio.Lock(), False, os.getpid()

    async def _run(self, operation: Op[T]) -> T:
        if self._pid != os.getpid():
            self._own_pool()
        if not self._open:
            await self._start()
        return await drive_async(operation, self._send)

    async def _send(self, call: Call[T]) -> T:
        lost = False
        try:
            async with self._pool.connection() as conn:
                try:
                    async with conn.transaction() if call.checked else contextlib.nullcontext():
                        cur = await conn.execute(call.sql, call.params)
                        return call.parse(await cur.fetchall())
                except psycopg.Error as exc:
                    lost = conn.broken
                    raise failure(exc, call, lost) from exc
        except (PoolTimeout, PoolClosed) as exc:
            raise _pool_failure(exc, self.settings) from exc
        finally:
            if lost:  # as in PostgresBackend._send
                await self._pool.check()

    async def search(
        self,
        session_ids: Sequence[str] | None,
        terms: Sequence[str],
        k: int,
        include_hidden: bool,
        now: float,
    ) -> list[Match]:
        return await self._run(self._ops.search(session_ids, terms, k, include_hidden, now))

    async def close(self) -> None:
        if self._pid != os.getpid():
            self._own_pool()
        async with self._opening:
            self._closed = True
            if self._open:
                await self._pool.close()


def open_backend(url: str, **options: Any) -> Backend:
    """Open a ``postgresql://`` store: connect, check or migrate the schema, start the pool."""
    return PostgresBackend(settings(url, **options))


def open_async_backend(url: str, **options: Any) -> AsyncBackend:
    """Open a ``postgresql://`` store for asyncio; connects on the first operation."""
    return AsyncPostgresBackend(settings(url, **options))
