"""The PostgreSQL schema: migrations, options, what is stored and how."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import ConfigurationError, DuplicateMessageError, Message, SnapshotExistsError
from memvault.backends.base import Write
from memvault.backends.postgres.backend import MigrationResult, migrate, open_backend
from memvault.backends.postgres.migrations import latest, migrations
from memvault.messages import encode_message
from tests.support.postgres import SERVER, admin, new_schema, url_for


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


def _rows(sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with admin() as conn:
        return conn.execute(sql, args).fetchall()


def _schema_exists(schema: str) -> bool:
    return bool(_rows("SELECT 1 FROM pg_namespace WHERE nspname = %s", schema))


def test_migrate_applies_once_and_records_versions(schema: str) -> None:
    assert migrate(url_for(schema)) == MigrationResult(schema, 0, latest())
    assert migrate(SERVER, schema=schema) == MigrationResult(schema, latest(), latest())
    recorded = _rows(f'SELECT version, name FROM "{schema}".migrations ORDER BY version')
    assert recorded == [(m.version, m.name) for m in migrations()]


def test_opening_migrates_an_empty_schema(schema: str) -> None:
    assert not _schema_exists(schema)
    with memvault.open(url_for(schema)) as store:
        store.session("s").append([Message.user("x")])
    assert _rows(f'SELECT max(version) FROM "{schema}".migrations') == [(latest(),)]


def _make_newer(schema: str) -> None:
    with memvault.open(url_for(schema)) as store:
        store.session("s").append([Message.user("keep me")])
    with admin() as conn:
        conn.execute(
            f"INSERT INTO \"{schema}\".migrations (version, name) VALUES (%s, 'future')",
            (latest() + 1,),
        )


def test_newer_schema_is_refused_and_left_alone(schema: str) -> None:
    _make_newer(schema)
    with pytest.raises(ConfigurationError, match="newer than this memvault"):
        memvault.open(url_for(schema))
    with pytest.raises(ConfigurationError, match="newer"):
        migrate(url_for(schema))
    with admin() as conn:
        conn.execute(f'DELETE FROM "{schema}".migrations WHERE version = %s', (latest() + 1,))
    with memvault.open(url_for(schema)) as store:
        assert [m.content for m in store.session("s").history()] == ["keep me"]


def test_async_face_refuses_a_newer_schema_on_first_use(schema: str) -> None:
    _make_newer(schema)

    async def run() -> None:
        store = memvault.open_async(url_for(schema))
        try:
            with pytest.raises(ConfigurationError, match="newer"):
                await store.session("s").history()
        finally:
            await store.close()

    asyncio.run(run())


# The migrations as released before the functions moved to functions.sql: each
# version's files created and replaced its functions themselves.
HISTORY = Path(__file__).parents[1] / "data" / "postgres_history"


def as_released(schema: str, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until ``monkeypatch.undo()``, memvault migrates as the release at ``version``
    did; ``schema`` is migrated so now."""
    import memvault.backends.postgres.migrations as pm

    files = sorted(HISTORY.glob("*.sql"))[:version]
    old = tuple(pm.Migration(int(f.name[:3]), f.stem, f.read_text("utf-8")) for f in files)
    monkeypatch.setattr(pm, "migrations", lambda: old)
    monkeypatch.setattr(pm, "functions", lambda: "-- released before functions.sql")
    migrate(url_for(schema))


def as_the_release_left_it(schema: str) -> None:
    """Remove what only today's script adds (the record of the applied functions)."""
    with admin() as conn:
        conn.execute(f'DROP TABLE "{schema}".functions')


@pytest.mark.parametrize("start", range(1, len(list(HISTORY.glob("*.sql"))) + 1))
def test_an_older_schema_upgrades_and_keeps_its_data_and_refusals(
    schema: str, monkeypatch: pytest.MonkeyPatch, start: int
) -> None:
    """Failing: a later migration or functions.sql that does not apply over an older
    released version (a function it replaces changed its signature, an index it
    rebuilds is missing), or that changes what append and snapshot return or refuse,
    or the log, once applied to a schema holding data."""
    as_released(schema, start, monkeypatch)
    with memvault.open(url_for(schema)) as store:  # still version 1: no upgrade yet
        s = store.session("s")
        turn = [Message.user("a"), Message.assistant("b")]
        assert s.append(turn) == 1
        s.snapshot("cp")
    monkeypatch.undo()
    as_the_release_left_it(schema)
    assert migrate(url_for(schema)) == MigrationResult(schema, start, latest())
    with memvault.open(url_for(schema)) as store:
        s = store.session("s")
        assert s.append(turn) == 1  # a retry is still a no-op
        with pytest.raises(DuplicateMessageError, match="1 of 2"):
            s.append([turn[1], Message.user("new")])
        with pytest.raises(SnapshotExistsError):
            s.snapshot("cp")
        assert s.append([Message.user("c")], expect_version=1) == 2
        assert [m.content for m in s.history()] == ["a", "b", "c"]
        assert [(e.op, e.version) for e in s.log()] == [
            ("append", 1),
            ("snapshot", 1),
            ("append", 2),
        ]


def test_changed_functions_are_applied_without_a_migration(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failing: an edit to functions.sql that never reaches a migrated schema, or a
    release that silently runs on another release's functions with migrate=False."""
    import memvault.backends.postgres.migrations as pm

    migrate(url_for(schema))
    probe = "CREATE FUNCTION @schema@._probe() RETURNS int LANGUAGE sql AS $$ SELECT 7 $$;"
    changed = pm.functions() + "\n" + probe + "\n"
    monkeypatch.setattr(pm, "functions", lambda: changed)
    with pytest.raises(ConfigurationError, match="functions other than this memvault's"):
        memvault.open(url_for(schema), migrate=False)
    assert migrate(url_for(schema)) == MigrationResult(schema, latest(), latest())
    assert _rows(f'SELECT "{schema}"._probe()') == [(7,)]
    assert len(_rows(f'SELECT sha256 FROM "{schema}".functions')) == 1
    with memvault.open(url_for(schema), migrate=False) as store:  # this release's now
        assert store.session("s").append([Message.user("x")]) == 1
    assert _rows(f'SELECT max(version) FROM "{schema}".migrations') == [(latest(),)]


def test_the_released_latest_version_takes_the_functions_file(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema the last release before functions.sql migrated (no functions table)
    gets functions.sql, and any later migration, on the next migrate; migrate=False
    asks for it."""
    released = len(list(HISTORY.glob("*.sql")))
    as_released(schema, released, monkeypatch)
    monkeypatch.undo()
    as_the_release_left_it(schema)
    with pytest.raises(ConfigurationError, match="memvault migrate"):
        memvault.open(url_for(schema), migrate=False)
    assert migrate(url_for(schema)) == MigrationResult(schema, released, latest())
    with memvault.open(url_for(schema), migrate=False) as store:
        assert store.session("s").append([Message.user("x")]) == 1


def test_migrate_false_only_checks(schema: str) -> None:
    """migrate=False never creates anything; it asks for `memvault migrate`."""
    with pytest.raises(ConfigurationError, match="memvault migrate"):
        memvault.open(url_for(schema), migrate=False)
    assert not _schema_exists(schema)
    migrate(url_for(schema))
    with memvault.open(url_for(schema), migrate=False) as store:
        assert store.session("s").append([Message.user("x")]) == 1


def test_schema_as_option_or_url_parameter(schema: str) -> None:
    with memvault.open(SERVER, schema=schema) as store:
        store.session("s").append([Message.user("x")])
    with memvault.open(url_for(schema)) as store:
        assert store.sessions() == ["s"]
    with pytest.raises(ConfigurationError, match="names schema"):
        memvault.open(url_for(schema), schema="other")


def test_postgres_scheme_alias(schema: str) -> None:
    url = url_for(schema).replace("postgresql://", "postgres://", 1)
    assert url.startswith("postgres://")
    with memvault.open(url) as store:
        assert store.session("s").append([Message.user("x")]) == 1


@pytest.mark.parametrize(
    "options",
    [
        {"schema": "bad-name"},
        {"schema": "1st"},
        {"schema": "x" * 64},
        {"schema": 'a"b'},
        {"schema": ""},
        {"min_size": -1},
        {"max_size": 0},
        {"min_size": 5, "max_size": 2},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"timeout": float("nan")},
        {"migrate": "yes"},
        {"pool": 3},
    ],
)
def test_bad_options_are_configuration_errors(options: dict[str, Any]) -> None:
    """Checked before connecting (the URL points nowhere)."""
    with pytest.raises(ConfigurationError):
        memvault.open("postgresql://u:s3cret@127.0.0.1:1/x", **options)


def test_repr_never_shows_the_password(schema: str) -> None:
    url = url_for(schema).replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
    assert "s3cret-pw" in url
    with memvault.open(url) as store:  # trust auth ignores the password
        assert "s3cret-pw" not in repr(store) and "s3cret-pw" not in repr(store.backend)


def test_application_name_reaches_the_server(schema: str) -> None:
    app = f"mvapp_{schema[-8:]}"
    with memvault.open(url_for(schema, application_name=app), min_size=2) as store:
        store.session("s").append([Message.user("x")])
        names = _rows("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", app)
        assert names[0][0] >= 1


def test_storage_keeps_nul_and_bytes_exactly(schema: str) -> None:
    """NUL survives in ids, names and bodies: ids are UTF-8 bytea, bodies the
    envelope's text byte for byte (jsonb would reject its \\u0000)."""
    message = Message.user("nul \x00 here", id="id\x00é")
    with memvault.open(url_for(schema), writer="w\x00r") as store:
        s = store.session("sess\x00ion")
        s.append([message])
        s.snapshot("snap\x00")
        s.pop()
        log = s.log()
    assert log[-1].detail == {"message_id": "id\x00é"} and log[-1].writer == "w\x00r"
    assert log[-2].detail == {"name": "snap\x00"}
    q = f'"{schema}"'
    assert _rows(f"SELECT name FROM {q}.sessions") == [(b"sess\x00ion",)]
    assert _rows(f"SELECT msg_id, body FROM {q}.nodes") == [
        ("id\x00é".encode(), encode_message(message, 1 << 20).body)
    ]
    assert _rows(f"SELECT pg_typeof(body)::text FROM {q}.nodes") == [("text",)]


def test_compact_removes_expired_sessions_physically(schema: str) -> None:
    """An expired session is invisible at once and gone from every table after compact."""
    backend = open_backend(url_for(schema))
    try:
        past = Write("w", time.time() - 100, ttl=10)  # expired 90 s ago
        record = encode_message(Message.user("x"), 1 << 20)
        backend.append("old", [record], None, None, past)
        backend.snapshot("old", "cp", past)
        backend.append(
            "live",
            [encode_message(Message.user("y"), 1 << 20)],
            None,
            None,
            Write("w", time.time(), None),
        )
        assert backend.sessions(time.time()) == ["live"]
        stats = backend.compact(None, time.time())
        assert (stats.sessions, stats.nodes) == (1, 1)
    finally:
        backend.close()
    q = f'"{schema}"'
    for table in ("sessions", "nodes", "events"):
        assert _rows(f"SELECT count(*) FROM {q}.{table}") == [(1,)], table
    assert _rows(f"SELECT count(*) FROM {q}.snapshots") == [(0,)]


def test_a_schema_before_session_pages_gets_their_indexes(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at version 5 (before sessions_page) keeps its sessions, and after the
    upgrade pages them from the new indexes. Failing: migration 006 does not apply over
    data, or the function orders by other expressions than the indexes hold."""
    import memvault.backends.postgres.migrations as pm

    five = migrations()[:5]
    monkeypatch.setattr(pm, "migrations", lambda: five)
    with memvault.open(url_for(schema)) as store:
        for sid in ("b", "a", "c"):
            store.session(sid).append([Message.user(sid)])
    monkeypatch.undo()
    assert migrate(url_for(schema)) == MigrationResult(schema, 5, latest())
    with memvault.open(url_for(schema)) as store:
        page = store.sessions_page(2, order="version")
        assert [i.session_id for i in page.sessions] == ["a", "b"]
        assert [
            i.session_id
            for i in store.sessions_page(2, cursor=page.cursor, order="version").sessions
        ] == ["c"]
    indexes = {
        r[0] for r in _rows("SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema)
    }
    assert {
        "sessions_by_version",
        "sessions_by_length",
        "sessions_by_updated",
        "sessions_by_expires",
    } <= indexes


def test_a_store_written_before_the_search_index_finds_its_messages(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at version 7 (before search) with a summary, a pop and a rollback: after
    the upgrade, search finds its old messages at their full-view positions, the hidden
    ones only with include_hidden, and then what is appended. Failing: migration 008
    leaves the stored nodes out of the index, or indexes them with wrong visibility."""
    import memvault.backends.postgres.migrations as pm

    seven = migrations()[:7]
    monkeypatch.setattr(pm, "migrations", lambda: seven)
    with memvault.open(url_for(schema)) as store:
        s = store.session("s")
        s.append([Message.user("fig one"), Message.user("fig two"), Message.user("fig popped")])
        s.pop()
        s.snapshot("cp")
        s.append([Message.user("fig rolled back")])
        s.rollback("cp")
        s.summarize(Message.system("fig summary"), through=s.history()[0].id)
        store.session("t").append([Message.user("fig elsewhere")])
    monkeypatch.undo()
    assert migrate(url_for(schema)) == MigrationResult(schema, 7, latest())
    with memvault.open(url_for(schema)) as store:
        s = store.session("s")
        assert sorted((h.position, h.message.content) for h in s.search("fig")) == [
            (1, "fig one"),
            (2, "fig summary"),
            (3, "fig two"),
        ]
        hidden = {h.message.content for h in s.search("fig", include_hidden=True) if h.hidden}
        assert hidden == {"fig popped", "fig rolled back"}
        s.append([Message.user("fig new")])
        assert {h.session_id for h in store.search("fig", k=100)} == {"s", "t"}
        assert [h.position for h in s.search("new")] == [4]
