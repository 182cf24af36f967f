"""memvault through PgBouncer in transaction mode (a private one, two server connections).

PgBouncer before 1.21 (Debian 12 ships 1.18) does not follow prepared statements: each
transaction runs on whatever server connection is free, and a statement psycopg
prepared on one (after its fifth run on a client connection, named ``_pg3_<n>`` per
client connection) is missing on another, or is another client's statement under the
same name. Opened with ``prepared_statements=False``, memvault prepares nothing, and
every operation of both faces works through it, as do migrations and the contract
(see :class:`BouncerContract` for which parts run here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import memvault
from memvault import BackendError, ConfigurationError, Message
from memvault.backends.postgres.backend import migrate, settings
from memvault.testing import (
    BasicsContract,
    CancellationContract,
    ConcurrencyContract,
    DurabilityContract,
    FaultsContract,
    ModelContract,
    SnapshotsContract,
    WritesContract,
)
from memvault.testing.contract.concurrency import in_threads
from tests.backends.test_contract_postgres import PostgresContract
from tests.support.pgbouncer import PgBouncer, pgbouncer
from tests.support.postgres import new_schema

CLIENTS = 6  # client connections (threads, tasks, pool size): three per server connection
ROUNDS = 12  # each statement runs ROUNDS * CLIENTS times over CLIENTS connections: > 5 each


@pytest.fixture(scope="module")
def bouncer() -> Iterator[PgBouncer]:
    with pgbouncer() as running:
        yield running


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


def _unprepared(bouncer: PgBouncer, schema: str) -> str:
    return bouncer.store_url(schema, prepared_statements="false")


def _turn(n: int, i: int) -> list[Message]:
    return [Message.user(f"client {n} asks kiwi{i}"), Message.assistant(f"answer {n}.{i}")]


def _shared_server_connections(bouncer: PgBouncer) -> None:
    """The clients really shared PgBouncer's two server connections."""
    assert len(bouncer.show("SERVERS")) <= 2
    assert len([c for c in bouncer.show("CLIENTS") if c["database"] == bouncer.dbname]) >= CLIENTS


def test_every_operation_from_threads_through_pgbouncer(bouncer: PgBouncer, schema: str) -> None:
    """CLIENTS threads on a pool of CLIENTS connections, ROUNDS rounds of every kind of
    call, each result checked (a statement run in another's place shows). Failing
    before prepared_statements=False: "prepared statement "_pg3_0" does not exist" /
    "already exists", "bind message supplies 5 parameters, but prepared statement
    "_pg3_3" requires 7", snapshot running rollback ("snapshot not found")."""
    with memvault.open(_unprepared(bouncer, schema), min_size=CLIENTS, max_size=CLIENTS) as store:

        def client(n: int) -> None:
            s = store.session(f"thread {n}")
            for i in range(ROUNDS):
                assert s.append(_turn(n, i)) == 3 * i + 1
                assert [m.content for m in s.history(last=2)] == [m.content for m in _turn(n, i)]
                assert s.snapshot(f"s{i}").length == 2 * i + 2
                assert s.append([Message.user("dropped")]) == 3 * i + 2
                assert s.rollback(f"s{i}").name == f"auto:pre-rollback@v{3 * i + 2}"
                info = s.info()
                assert info is not None and (info.version, info.length) == (3 * i + 3, 2 * i + 2)
                assert [h.message.content for h in s.search(f"kiwi{i}", k=1)] == [
                    f"client {n} asks kiwi{i}"
                ]
                assert len(s.snapshots()) == 2 * i + 2
                assert s.log()[-1].op == "rollback"
                [listed] = store.sessions_page(1, match=f"thread {n}").sessions
                assert (listed.session_id, listed.version) == (f"thread {n}", 3 * i + 3)
            assert len(s.history()) == 2 * ROUNDS

        in_threads(client, list(range(CLIENTS)))
        _shared_server_connections(bouncer)
        assert sorted(store.sessions()) == sorted(f"thread {n}" for n in range(CLIENTS))
        store.compact()


def test_every_operation_from_asyncio_through_pgbouncer(bouncer: PgBouncer, schema: str) -> None:
    """The async face, its pool as large as the number of tasks: as above."""

    async def main() -> None:
        async with memvault.open_async(
            _unprepared(bouncer, schema), min_size=CLIENTS, max_size=CLIENTS
        ) as store:

            async def client(n: int) -> None:
                s = store.session(f"task {n}")
                for i in range(ROUNDS):
                    assert await s.append(_turn(n, i)) == 3 * i + 1
                    assert [m.content for m in await s.history(last=2)] == [
                        m.content for m in _turn(n, i)
                    ]
                    assert (await s.snapshot(f"s{i}")).length == 2 * i + 2
                    await s.append([Message.user("dropped")])
                    await s.rollback(f"s{i}")
                    info = await s.info()
                    assert info is not None and info.length == 2 * i + 2
                    hits = await s.search(f"kiwi{i}", k=1)
                    assert [h.message.content for h in hits] == [f"client {n} asks kiwi{i}"]
                    assert len(await s.snapshots()) == 2 * i + 2
                    assert (await s.log())[-1].op == "rollback"
                    page = await store.sessions_page(1, match=f"task {n}")
                    assert [info.length for info in page.sessions] == [2 * i + 2]
                assert len(await s.history()) == 2 * ROUNDS

            await asyncio.gather(*(client(n) for n in range(CLIENTS)))
            _shared_server_connections(bouncer)
            await store.compact()

    asyncio.run(main())


def test_migrations_through_pgbouncer(bouncer: PgBouncer, schema: str) -> None:
    """Opening a new schema from several threads at once, then `migrate`: the advisory
    lock is transaction-scoped, so each migration is applied once, and the script's
    version read (a transaction-local setting) stays in its transaction."""
    url = _unprepared(bouncer, schema)
    versions: list[int] = []

    def open_and_append(n: int) -> None:
        with memvault.open(url) as store:
            versions.append(store.session(f"s{n}").append([Message.user("x")]))

    in_threads(open_and_append, list(range(CLIENTS)))
    assert versions == [1] * CLIENTS
    done = migrate(bouncer.url, schema=schema)
    assert done.before == done.after
    with memvault.open(url, migrate=False) as store:
        assert len(store.sessions()) == CLIENTS
    with psycopg.connect(bouncer.url) as conn:  # each migration recorded exactly once
        rows = conn.execute(
            f'SELECT version, count(*) FROM "{schema}".migrations'
            " GROUP BY version HAVING count(*) > 1"
        ).fetchall()
    assert rows == []


class _Pinned:
    """Two transactions held open through a two-connection PgBouncer: while one is
    held, every other transaction runs on the other server connection."""

    def __init__(self, bouncer: PgBouncer) -> None:
        self.holders = [psycopg.connect(bouncer.url), psycopg.connect(bouncer.url)]

    def hold(self, i: int) -> None:
        self.holders[i].execute("SELECT 1")  # opens a transaction: pins a server connection

    def release(self, i: int) -> None:
        self.holders[i].commit()

    def close(self) -> None:
        for conn in self.holders:
            conn.close()


@pytest.fixture
def pinned(request: pytest.FixtureRequest) -> Iterator[tuple[PgBouncer, _Pinned]]:
    """A PgBouncer of its own (server connections with no statement prepared by
    another test) and the means to steer each transaction to one of its two."""
    with pgbouncer() as running:
        pins = _Pinned(running)
        try:
            yield running, pins
        finally:
            pins.close()


def _prepare_info_then_lose_it(store: Any, pins: _Pinned, meanwhile: Callable[[], None]) -> Any:
    """Store a message in session "victim", run its info() six times (psycopg prepares
    it) on server connection B, then once more on A, after ``meanwhile`` ran there;
    return that last result."""
    s = store.session("victim")
    s.append([Message.user("keep me")])
    pins.hold(0)  # A held: the six run on B
    for _ in range(6):
        assert s.info() is not None
    pins.hold(1)  # B held
    pins.release(0)
    meanwhile()  # on A
    try:
        return s.info()  # on A
    finally:
        pins.release(1)


def test_a_read_never_runs_another_clients_statement(
    pinned: tuple[PgBouncer, _Pinned], schema: str
) -> None:
    """Another client prepared `delete` under the name psycopg gave our `info`
    ("_pg3_0": both numbered from 0 per client connection) on the server connection
    our next `info` lands on. Failing before prepared_statements=False: that info ran
    the delete with its own arguments, deleting the session, and raised a bare
    ValueError (one boolean row where it expected five columns)."""
    bouncer, pins = pinned
    with memvault.open(_unprepared(bouncer, schema), max_size=1) as store:
        other = psycopg.connect(bouncer.url, autocommit=True)

        def prepare_delete() -> None:
            other.execute(
                f'SELECT * FROM "{schema}".delete(%b::bytea, %b::float8)',
                (b"nobody", time.time()),
                prepare=True,
            )

        try:
            info = _prepare_info_then_lose_it(store, pins, prepare_delete)
        finally:
            other.close()
        assert info is not None and info.length == 1
        assert [m.content for m in store.session("victim").history()] == ["keep me"]


def test_a_statement_prepared_elsewhere_names_the_option(
    pinned: tuple[PgBouncer, _Pinned], schema: str
) -> None:
    """With prepared statements (the default), the error of a statement prepared on
    another server connection says what to do about it."""
    bouncer, pins = pinned
    with memvault.open(bouncer.store_url(schema), max_size=1) as store:
        with pytest.raises(
            BackendError,
            match=r'"_pg3_0" does not exist \(behind PgBouncer '
            r"in transaction mode\? open the store with "
            r"prepared_statements=False\)",
        ):
            _prepare_info_then_lose_it(store, pins, lambda: None)


def test_prepared_statements_from_the_url_or_a_keyword() -> None:
    """On by default; the URL parameter is memvault's (libpq never sees it); a keyword
    wins over the URL, as every backend's options do."""
    url = "postgresql://u@db/x?sslmode=disable&prepared_statements=false&schema=s"
    assert settings("postgresql://u@db/x").prepared_statements is True
    off = settings(url)
    assert off.prepared_statements is False and "prepared" not in off.conninfo
    assert settings(url, prepared_statements=True).prepared_statements is True
    assert settings("postgresql://u@db/x?prepared_statements=no").prepared_statements is False


@pytest.mark.parametrize(
    ("url", "options", "error"),
    [
        ("?prepared_statements=maybe", {}, "bad value 'maybe' for prepared_statements"),
        ("", {"prepared_statements": "false"}, "prepared_statements must be True or False"),
        ("", {"prepared_statements": None}, "prepared_statements must be True or False"),
    ],
)
def test_bad_prepared_statements_values_are_refused_before_connecting(
    url: str, options: dict[str, Any], error: str
) -> None:
    for face in (memvault.open, memvault.open_async):
        with pytest.raises(ConfigurationError, match=error):
            face(f"postgresql://u@127.0.0.1:1/x{url}", **options)


class BouncerContract(PostgresContract):
    """The PostgreSQL contract, the store URL going through PgBouncer (transaction
    mode) with ``?prepared_statements=false``; worker processes open it too.

    Only the parts that drive every kind of call, from threads and processes, and
    cancelled async calls. The whole contract (both faces) passed through PgBouncer
    too, with the three skips it has without (493 passed, before the cancellation
    part joined it), but took 7.5 minutes on the 2-core CI machine, a schema made and
    migrated per test through two server connections. Nothing in the parts left out
    (inputs, serialization, corruption, TTL, paging, search, summaries, vectors,
    versions) concerns a pooler more than what is kept; search and paging run in the
    tests above, from threads and tasks.
    """

    @pytest.fixture
    def store_url(self, request: pytest.FixtureRequest, tmp_path: Path, bouncer: PgBouncer) -> str:
        return _unprepared(bouncer, new_schema(request))


class TestBouncer(
    BouncerContract,
    BasicsContract,
    WritesContract,
    SnapshotsContract,
    ConcurrencyContract,
    FaultsContract,
    DurabilityContract,
    ModelContract,
):
    face = "sync"


class TestBouncerAsync(
    BouncerContract,
    BasicsContract,
    WritesContract,
    SnapshotsContract,
    ConcurrencyContract,
    CancellationContract,
    ModelContract,
):
    face = "async"
