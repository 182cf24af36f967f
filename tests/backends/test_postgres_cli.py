"""``memvault migrate``."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memvault.backends.postgres.migrations import latest
from memvault.cli.app import app
from tests.support.postgres import admin, new_schema, url_for


def _app() -> typer.Typer:
    return app


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


def test_migrate_then_up_to_date(schema: str) -> None:
    runner = CliRunner()
    first = runner.invoke(_app(), ["migrate", "--url", url_for(schema)])
    assert first.exit_code == 0, first.output
    assert f"migrated from version 0 to {latest()}" in first.output
    again = runner.invoke(_app(), ["--url", url_for(schema), "migrate"])  # the global --url
    assert again.exit_code == 0 and "up to date" in again.output


def test_schema_option_and_redacted_url(schema: str) -> None:
    url = url_for(schema).split("?")[0].replace("postgres@", "postgres:s3cret-pw@")
    result = CliRunner().invoke(_app(), ["migrate", "--url", url, "--schema", schema])
    assert result.exit_code == 0, result.output
    assert "s3cret-pw" not in result.output and schema in result.output
    with admin() as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".migrations').fetchone() == (latest(),)


def test_newer_schema_exits_1_with_one_line(schema: str) -> None:
    runner = CliRunner()
    assert runner.invoke(_app(), ["migrate", "--url", url_for(schema)]).exit_code == 0
    with admin() as conn:
        conn.execute(f"INSERT INTO \"{schema}\".migrations VALUES (%s, 'future')", (latest() + 1,))
    result = runner.invoke(_app(), ["migrate", "--url", url_for(schema)])
    assert result.exit_code == 1
    assert "ConfigurationError" in result.output and "newer" in result.output
    assert "Traceback" not in result.output


def test_other_backends_migrate_by_opening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    result = CliRunner().invoke(_app(), ["migrate", "--url", url])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m.db").exists()
    refused = CliRunner().invoke(_app(), ["migrate", "--url", url, "--schema", "x"])
    assert refused.exit_code == 1 and "PostgreSQL only" in refused.output
