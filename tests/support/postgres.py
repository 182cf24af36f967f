"""The PostgreSQL server our tests run against, and a fresh schema per test.

The server is ``$MEMVAULT_TEST_POSTGRES`` (default: database ``test`` on
127.0.0.1:5432 as user ``postgres``). It must be running: a test that needs it
FAILS, naming the URL, when it cannot be reached; it is never skipped.

Each test gets its own schema, named ``mvtest_<random>`` and dropped afterwards.
The schema travels in the store URL (``?schema=...``), so the URL alone names the
store: the registry, the contract's Opener and worker processes need nothing else.
Other test runs share the server, so only schemas made here are ever dropped.
"""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path

import psycopg
import pytest

SERVER = os.environ.get("MEMVAULT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _unreachable() -> str | None:
    try:
        psycopg.connect(SERVER, connect_timeout=5).close()
    except psycopg.Error as exc:
        return str(exc).strip()
    return None


def admin() -> psycopg.Connection[tuple[object, ...]]:
    """A direct autocommit connection to the test server (fails the test if it is down)."""
    problem = _unreachable()
    if problem is not None:
        pytest.fail(
            f"PostgreSQL is required and not reachable at {SERVER} ({problem}). Start it, or "
            "point $MEMVAULT_TEST_POSTGRES at a server with a database you may create "
            "schemas in.",
            pytrace=False,
        )
    return psycopg.connect(SERVER, autocommit=True)


def new_schema(request: pytest.FixtureRequest) -> str:
    """A schema name no one else uses, dropped when the test ends."""
    schema = f"mvtest_{uuid.uuid4().hex[:16]}"
    admin().close()  # fail now, clearly, if the server is down
    request.addfinalizer(lambda: drop_schema(schema))
    return schema


def drop_schema(schema: str) -> None:
    assert schema.startswith("mvtest_"), schema  # never drop what we did not create
    with admin() as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def url_for(schema: str, *, server: str = SERVER, **params: str) -> str:
    """The store URL of ``schema`` on the test server (or ``server``, a URL reaching
    it), with extra parameters; ``schema`` last, where :func:`schema_of` finds it."""
    query = "&".join(f"{k}={v}" for k, v in {**params, "schema": schema}.items())
    return f"{server}{'&' if '?' in server else '?'}{query}"


def postgres_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The registry's URL maker: an empty store in a fresh schema."""
    return url_for(new_schema(request))


def schema_of(url: str) -> str:
    return url.rsplit("schema=", 1)[1].split("&", 1)[0]


def corrupt(url: str, session_id: str, depth: int, body: str) -> None:
    """Overwrite the stored body of the message at ``depth`` (for the contract suite)."""
    q = f'"{schema_of(url)}"'
    with admin() as conn:
        changed = conn.execute(
            f"UPDATE {q}.nodes SET body = %s WHERE depth = %s AND sid ="
            f" (SELECT sid FROM {q}.sessions WHERE name = %s)",
            (body, depth, session_id.encode()),
        ).rowcount
    assert changed == 1


def damage(url: str, session_id: str, depth: int, kind: str) -> None:
    """Break a session as CorruptionContract.damage describes."""
    q = f'"{schema_of(url)}"'
    sid = f"(SELECT sid FROM {q}.sessions WHERE name = %(name)s)"
    first = f"(SELECT min(id) FROM {q}.snapshots WHERE sid = {sid})"  # the first snapshot
    sql = {
        "missing": f"DELETE FROM {q}.nodes WHERE sid = {sid} AND depth = %(depth)s",
        "self-parent": f"UPDATE {q}.nodes SET parent = node WHERE sid = {sid}"
        f" AND depth = %(depth)s",
        "summary": f"DELETE FROM {q}.nodes WHERE sid = {sid} AND node = (SELECT max(node)"
        f" FROM {q}.nodes WHERE sid = {sid} AND depth = %(depth)s)",
        "event": f"UPDATE {q}.events SET detail = 'not json {{' WHERE id ="
        f" (SELECT max(id) FROM {q}.events WHERE sid = {sid})",
        "snapshot": f"UPDATE {q}.snapshots SET created_at = 1e300 WHERE id = {first}",
        "snapshot-length": f"UPDATE {q}.snapshots SET length = -7 WHERE id = {first}",
        "snapshot-head": f"UPDATE {q}.snapshots SET head = 999 WHERE id = {first}",
        "snapshot-head-next": f"UPDATE {q}.snapshots n SET head = (SELECT next_node FROM"
        f" {q}.sessions s WHERE s.sid = n.sid) WHERE id = {first}",
        "snapshot-head-below-0": f"UPDATE {q}.snapshots SET head = -1 WHERE id = {first}",
        "snapshot-base-below-0": f"UPDATE {q}.snapshots SET base = -1 WHERE id = {first}",
    }[kind]
    with admin() as conn:
        changed = conn.execute(sql, {"name": session_id.encode(), "depth": depth}).rowcount
    assert changed == 1
