"""Versioned migrations of memvault's PostgreSQL schema (no I/O here).

Each file ``postgres/sql/NNN_name.sql`` is one migration of the tables, indexes,
types and data, applied once, in order, and recorded in
``<schema>.migrations (version, name, applied_at)``. The functions are not in
migrations: ``postgres/sql/functions.sql`` holds the current definition of each
one (``CREATE OR REPLACE``), applied after the migrations whenever its content
differs from what the schema last applied (its SHA-256 is recorded in
``<schema>.functions``), so a reader finds every function in one place and a
change to one needs no migration. In the files, ``@schema@`` stands for the
quoted schema name.

:func:`script` renders the whole check-and-migrate as one SQL string, run by the
sync and async faces alike: a ``DO`` block that takes a transaction-scoped
advisory lock (so two processes migrating at once apply each migration exactly
once; the second waits, then finds nothing to do), refuses a schema newer than
this code, applies what is missing, then a ``SELECT`` of the version found
before. Without ``apply`` it only checks, and never needs the CREATE privilege.

Processes of two memvault releases whose functions differ each re-apply their own
when they open with ``migrate=True``; upgrade them together, or open with
``migrate=False`` (which refuses functions other than its own) and run
``memvault migrate`` once per release.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from memvault.errors import ConfigurationError

PLACEHOLDER = "@schema@"
DEFAULT_SCHEMA = "memvault"
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_FILE_NAME = re.compile(r"(\d{3})_(\w+)\.sql")

# SQLSTATEs the script raises.
NEWER = "MV100"
OLDER = "MV101"
NOT_UTF8 = "MV102"
OTHER_FUNCTIONS = "MV103"


@dataclass(frozen=True)
class Migration:
    """One migration file: its version, its name (the file name without .sql), its SQL."""

    version: int
    name: str
    sql: str


@functools.cache
def migrations() -> tuple[Migration, ...]:
    """Every migration shipped with this package, in order (versions 1, 2, ... without gaps)."""
    folder = resources.files("memvault.backends.postgres").joinpath("sql")
    found = []
    for item in folder.iterdir():
        match = _FILE_NAME.fullmatch(item.name)
        if match:
            found.append(Migration(int(match.group(1)), item.name[:-4], item.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"memvault's PostgreSQL migrations are incomplete: {found!r}")
    return tuple(found)


@functools.cache
def functions() -> str:
    """The text of ``postgres/sql/functions.sql``: every function's current definition."""
    folder = resources.files("memvault.backends.postgres").joinpath("sql")
    return folder.joinpath("functions.sql").read_text("utf-8")


def latest() -> int:
    """The schema version this code reads and writes."""
    return migrations()[-1].version


def check_schema(schema: object) -> str:
    """The schema name if valid: a plain identifier (letters, digits, ``_``), up to 63 chars.

    Raises:
        ConfigurationError: anything else.
    """
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise ConfigurationError(
            f"schema must be a name of letters, digits and '_' (not starting with a digit, "
            f"at most 63 characters), not {schema!r}"
        )
    return schema


def quote(schema: str) -> str:
    """The schema as a quoted identifier (case kept); ``schema`` passed :func:`check_schema`."""
    return f'"{schema}"'


def lock_key(schema: str) -> int:
    """The advisory lock migrating ``schema`` takes: a stable signed 64-bit hash."""
    digest = hashlib.sha256(f"memvault:migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def script(schema: str, *, apply: bool) -> str:
    """The check-and-migrate SQL: one DO block, then ``SELECT`` the version found before.

    Raises SQLSTATE :data:`NEWER` (detail: the version found) for a schema newer
    than this code; when ``apply`` is false, :data:`OLDER` for a schema behind and
    :data:`OTHER_FUNCTIONS` for one whose functions are not this code's;
    :data:`NOT_UTF8` unless the database encoding is UTF8.
    """
    q = quote(schema)
    steps = []
    for m in migrations():
        tag = f"$memvault_{m.version}$"
        body = _render(m.name, m.sql, q, tag)
        steps.append(
            f"    IF v_current < {m.version} THEN\n"
            f"        EXECUTE {tag}{body}{tag};\n"
            f"        INSERT INTO {q}.migrations (version, name)\n"
            f"        VALUES ({m.version}, '{m.name}');\n"
            f"    END IF;\n"
        )
    tag = "$memvault_functions$"
    body = _render("functions.sql", functions(), q, tag)
    sha = hashlib.sha256(functions().encode()).hexdigest()
    return f"""DO $memvault$
DECLARE
    v_current integer := 0;
    v_functions boolean := false;
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'memvault needs a UTF8 database, not %',
            current_setting('server_encoding') USING ERRCODE = '{NOT_UTF8}';
    END IF;
    PERFORM pg_advisory_xact_lock({lock_key(schema)});
    IF to_regclass('{q}.migrations') IS NOT NULL THEN
        SELECT coalesce(max(version), 0) INTO v_current FROM {q}.migrations;
    END IF;
    IF to_regclass('{q}.functions') IS NOT NULL THEN
        SELECT EXISTS (SELECT 1 FROM {q}.functions WHERE sha256 = '{sha}') INTO v_functions;
    END IF;
    PERFORM set_config('memvault.schema_before', v_current::text, true);
    IF v_current > {latest()} THEN
        RAISE EXCEPTION 'schema is newer than this memvault'
            USING ERRCODE = '{NEWER}', DETAIL = v_current;
    END IF;
    IF v_current = {latest()} AND v_functions THEN
        RETURN;
    END IF;
    IF NOT {str(apply).lower()} AND v_current < {latest()} THEN
        RAISE EXCEPTION 'schema needs migrating' USING ERRCODE = '{OLDER}', DETAIL = v_current;
    END IF;
    IF NOT {str(apply).lower()} THEN
        RAISE EXCEPTION 'schema functions are not this memvault''s'
            USING ERRCODE = '{OTHER_FUNCTIONS}';
    END IF;
    IF to_regnamespace('{q}') IS NULL THEN
        CREATE SCHEMA {q};
    END IF;
    IF to_regclass('{q}.migrations') IS NULL THEN
        CREATE TABLE {q}.migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
    END IF;
{"".join(steps)}    IF to_regclass('{q}.functions') IS NULL THEN
        CREATE TABLE {q}.functions (
            sha256 text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        );
    END IF;
    IF NOT v_functions THEN
        EXECUTE {tag}{body}{tag};
        DELETE FROM {q}.functions;
        INSERT INTO {q}.functions (sha256) VALUES ('{sha}');
    END IF;
END $memvault$;
SELECT current_setting('memvault.schema_before')::integer"""


def _render(name: str, sql: str, q: str, tag: str) -> str:
    """A SQL file with the schema filled in, checked to be safe inside ``tag``."""
    body = sql.replace(PLACEHOLDER, q)
    if tag in body or "$memvault$" in body:
        raise RuntimeError(f"{name} contains a reserved dollar-quote tag")
    return body


def refusal(state: str, detail: str, schema: str, where: str) -> ConfigurationError | None:
    """The ConfigurationError for a SQLSTATE the script raises (None for any other)."""
    if state == NEWER:
        return ConfigurationError(
            f"{where}: schema {schema!r} is at version {detail}, newer than this memvault "
            f"(it reads up to version {latest()}): upgrade memvault"
        )
    if state == OLDER:
        return ConfigurationError(
            f"{where}: schema {schema!r} is at version {detail}, this memvault needs "
            f"{latest()}: run `memvault migrate --url ...` or open with migrate=True"
        )
    if state == OTHER_FUNCTIONS:
        return ConfigurationError(
            f"{where}: schema {schema!r} holds functions other than this memvault's (another "
            f"release applied its own): run `memvault migrate --url ...` or open with "
            f"migrate=True"
        )
    if state == NOT_UTF8:
        return ConfigurationError(f"{where}: memvault needs a database with UTF8 encoding")
    return None
