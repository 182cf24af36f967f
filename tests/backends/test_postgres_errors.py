"""How the PostgreSQL backend reports failures, against the real server.

Nothing applied -> BackendUnavailableError; maybe applied -> OutcomeUnknownError;
the driver's error is always ``__cause__``; domain errors read exactly like the
engine's.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import memvault
from memvault import (
    BackendError,
    BackendUnavailableError,
    ConflictError,
    DuplicateMessageError,
    Message,
    OutcomeUnknownError,
    SnapshotExistsError,
    SnapshotNotFoundError,
)
from tests.support.postgres import SERVER, admin, new_schema, url_for

REFUSED = "postgresql://postgres:s3cret-pw@127.0.0.1:1/test?connect_timeout=5"


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


def test_connection_refused_is_unavailable_and_hides_the_password() -> None:
    with pytest.raises(BackendUnavailableError) as err:
        memvault.open(REFUSED)
    assert isinstance(err.value.__cause__, psycopg.OperationalError)
    assert "s3cret-pw" not in str(err.value) and "***" in str(err.value)


def test_async_connection_refused_surfaces_on_first_operation() -> None:
    async def run() -> None:
        store = memvault.open_async(REFUSED)  # never blocks the loop: connects lazily
        try:
            with pytest.raises(BackendUnavailableError) as err:
                await store.session("s").append([Message.user("x")])
            assert isinstance(err.value.__cause__, psycopg.OperationalError)
            assert "s3cret-pw" not in str(err.value)
        finally:
            await store.close()

    asyncio.run(run())


def test_libpq_parameters_are_honoured() -> None:
    """sslmode reaches libpq: this server has no SSL, so 'require' must fail to connect."""
    with admin() as conn:
        assert conn.execute("SHOW ssl").fetchone() == ("off",)
    with pytest.raises(BackendUnavailableError, match="SSL"):
        memvault.open(f"{SERVER}?sslmode=require")


@pytest.fixture
def locked_session(schema: str) -> Iterator[Callable[[str], None]]:
    """Call it with a lock statement: the session 's' (one message) is then locked by
    another connection until the test ends."""
    with memvault.open(url_for(schema)) as store:
        store.session("s").append([Message.user("before", id="m0")])
    holder = admin()
    holder.autocommit = False

    def lock(statement: str) -> None:
        holder.execute(statement.replace("@", f'"{schema}"'))

    yield lock
    holder.rollback()
    holder.close()


def _history_ids(schema: str) -> list[str]:
    with memvault.open(url_for(schema)) as store:
        return [m.id for m in store.session("s").history()]


@pytest.mark.parametrize("setting", ["statement_timeout", "lock_timeout"])
def test_timeouts_roll_back_and_say_nothing_was_applied(
    schema: str, locked_session: Callable[[str], None], setting: str
) -> None:
    """A write that times out waiting for the session's row lock: the server rolled
    it back, so BackendUnavailableError, and nothing was written."""
    locked_session("SELECT 1 FROM @.sessions FOR UPDATE")
    url = url_for(schema, options=f"-c%20{setting}%3D300")
    with memvault.open(url) as store:
        with pytest.raises(BackendUnavailableError, match="rolled back") as err:
            store.session("s").append([Message.user("late", id="m1")])
        assert isinstance(
            err.value.__cause__, psycopg.errors.QueryCanceled | psycopg.errors.LockNotAvailable
        )
    locked_session("ROLLBACK")
    assert _history_ids(schema) == ["m0"]


def _terminate_when_waiting(app: str) -> None:
    """Kill the backend of application ``app`` once it waits on a lock."""
    with admin() as conn:
        for _ in range(600):
            row = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (app,),
            ).fetchone()
            if row is not None:
                assert row[0] is True
                return
            time.sleep(0.05)
    raise AssertionError(f"no backend of {app} ever waited on a lock")


def _terminated(
    schema: str,
    lock: str,
    locked_session: Callable[[str], None],
    operation: Callable[[Any], object],
) -> BaseException:
    app = f"mvkill_{uuid.uuid4().hex[:8]}"
    locked_session(lock)
    with memvault.open(url_for(schema, application_name=app)) as store:
        killer = threading.Thread(target=_terminate_when_waiting, args=(app,))
        killer.start()
        try:
            with pytest.raises(BackendError) as err:
                operation(store)
        finally:
            killer.join()
        locked_session("ROLLBACK")
        assert store.session("s").info() is not None  # the pool recovered
    return err.value


def test_connection_killed_mid_write_is_outcome_unknown_and_retry_is_safe(
    schema: str, locked_session: Callable[[str], None]
) -> None:
    """pg_terminate_backend while an append waits: OutcomeUnknownError; retrying the
    same messages leaves them stored exactly once."""
    turn = [Message.user("q", id="m1"), Message.assistant("a", id="m2")]
    error = _terminated(
        schema,
        "SELECT 1 FROM @.sessions FOR UPDATE",
        locked_session,
        lambda store: store.session("s").append(turn),
    )
    assert isinstance(error, OutcomeUnknownError)
    assert isinstance(error.__cause__, psycopg.OperationalError)
    with memvault.open(url_for(schema)) as store:
        s = store.session("s")
        s.append(turn)
        s.append(turn)
        assert [m.id for m in s.history()] == ["m0", "m1", "m2"]


def test_connection_killed_mid_read_is_unavailable(
    schema: str, locked_session: Callable[[str], None]
) -> None:
    """A read has no outcome to lose: BackendUnavailableError."""
    error = _terminated(
        schema,
        "LOCK TABLE @.nodes IN ACCESS EXCLUSIVE MODE",
        locked_session,
        lambda store: store.session("s").history(),
    )
    assert type(error) is BackendUnavailableError
    assert isinstance(error.__cause__, psycopg.OperationalError)


def test_other_server_errors_are_backend_errors(schema: str) -> None:
    """A store whose schema vanished: BackendError naming the operation, not a hang."""
    with memvault.open(url_for(schema)) as store:
        store.session("s").append([Message.user("x")])
        with admin() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        with pytest.raises(BackendError, match="history") as err:
            store.session("s").history()
        assert type(err.value) is BackendError
        assert isinstance(err.value.__cause__, psycopg.ProgrammingError)


def _domain_errors(url: str) -> list[tuple[type[BaseException], str]]:
    """Provoke each domain error once; return (type, message) of each."""
    out: list[tuple[type[BaseException], str]] = []
    with memvault.open(url) as store:
        s = store.session("ses'\x00\"sion")
        s.append([Message.user("a", id="id\x00é👍"), Message.user("b", id="b")])
        s.snapshot("cp")
        store.session("other").append([Message.user("c")])
        attempts: list[Callable[[], object]] = [
            lambda: s.append([Message.user("n")], expect_version=7),
            lambda: s.append([Message.user("a", id="id\x00é👍"), Message.user("n", id="new")]),
            lambda: s.snapshot("cp"),
            lambda: s.rollback("nope\x00"),
            lambda: s.fork("other"),
            lambda: s.fork("new", at="missing"),
        ]
        for attempt in attempts:
            with pytest.raises(
                (ConflictError, DuplicateMessageError, SnapshotExistsError, SnapshotNotFoundError)
            ) as err:
                attempt()
            out.append((type(err.value), str(err.value)))
    return out


def test_domain_errors_match_the_engine_exactly(schema: str) -> None:
    assert _domain_errors(url_for(schema)) == _domain_errors("memory://")
