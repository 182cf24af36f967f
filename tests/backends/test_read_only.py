"""Reading must not write: read commands open SQLite read-only, never create a file,
and never wait for the write lock; an already-migrated store opens without it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

import memvault
from memvault import BackendError, BackendUnavailableError, ConfigurationError, Message
from memvault.cli import app

READS = [["sessions"], ["show", "x"], ["log", "x"], ["snapshots", "x"], ["export"],
         ["sessions", "--json"]]


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


@pytest.mark.parametrize("args", READS)
def test_reading_a_missing_file_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    one_line_error(cli("--url", f"sqlite:///{tmp_path}/typo.db", *args), "no such store",
                   "typo.db")
    assert list(tmp_path.iterdir()) == []


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_reads_do_not_wait_for_a_writer(tmp_path: Path) -> None:
    """A migrated store opens (read-write too) and reads while a writer holds the lock."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session("x").append([Message.user("hello")])
    with write_locked(tmp_path / "x.db"):
        for args in READS:
            done = cli("--url", f"{url}?busy_timeout=0", *args)
            assert done.exit_code == 0, (args, done.stderr)
        with memvault.open(url, busy_timeout=0) as store:
            assert [m.content for m in store.session("x").history()] == ["hello"]


def test_a_busy_new_database_is_unavailable_not_misconfigured(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "new.db").close()
    with write_locked(tmp_path / "new.db"), pytest.raises(BackendUnavailableError):
        memvault.open(f"sqlite:///{tmp_path}/new.db", busy_timeout=0)


def test_mode_ro_in_the_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        store.session("x").append([Message.user("hello")])
    with memvault.open(f"{url}?mode=ro") as store:
        assert store.sessions() == ["x"]
        with pytest.raises(BackendError):
            store.session("x").append([Message.user("more")])
    with pytest.raises(ConfigurationError, match="no such store"):
        memvault.open(f"sqlite:///{tmp_path}/missing.db?mode=ro")
    with pytest.raises(ConfigurationError, match="mode"):
        memvault.open(f"{url}?mode=wat")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["x.db"]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/abc", "redis://127.0.0.1:6379/1x",
                                 "redis://127.0.0.1:6379/0?db=abc",
                                 "redis://127.0.0.1:6379/-1"])
def test_redis_database_must_be_a_number(url: str) -> None:
    with pytest.raises(ConfigurationError, match="database"):
        memvault.open(url)
    one_line_error(cli("--url", url, "sessions"), "database")


def test_export_with_snapshots_writes_nothing(tmp_path: Path) -> None:
    """Snapshots are read from their pointers: no temporary fork, no write lock, the
    store read-only and unchanged."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url) as store:
        s = store.session("x")
        s.append([Message.user("one"), Message.user("two")])
        s.snapshot("cp")
        s.pop()
        log = s.log()
    with write_locked(tmp_path / "x.db"):
        done = cli("--url", f"{url}?busy_timeout=0", "export")
    assert done.exit_code == 0, done.stderr
    assert '"type":"snapshot","name":"cp"' in done.stdout and '"content":"two"' in done.stdout
    with memvault.open(url) as store:
        assert store.sessions() == ["x"] and store.session("x").log() == log
