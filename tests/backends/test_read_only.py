"""Reading must not write: read commands open SQLite read-only, never create a file,
and never wait for the write lock; an already-migrated store opens without it."""

from __future__ import annotations

import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

import memvault
from memvault import BackendError, BackendUnavailableError, ConfigurationError, Message
from memvault.cli.app import app

READS = [
    ["sessions"],
    ["show", "x"],
    ["log", "x"],
    ["snapshots", "x"],
    ["export"],
    ["sessions", "--json"],
]


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


@pytest.mark.parametrize("args", READS)
def test_reading_a_missing_file_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    one_line_error(cli("--url", f"sqlite:///{tmp_path}/typo.db", *args), "no such store", "typo.db")
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


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/abc",
        "redis://127.0.0.1:6379/1x",
        "redis://127.0.0.1:6379/0?db=abc",
        "redis://127.0.0.1:6379/-1",
    ],
)
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


@contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """Make files and folders read-only even for root (the tests run as root, for whom
    chmod restricts nothing): nothing in an immutable file changes, and nothing is
    created in or removed from an immutable folder (``chattr +i``)."""
    subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def filled(path: Path) -> str:
    url = f"sqlite:///{path}"
    with memvault.open(url) as store:
        s = store.session("x")
        s.append([Message.user("hello"), Message.assistant("hi")])
        s.snapshot("cp")
    return url


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def reads_work(url: str) -> None:
    for args in READS:
        done = cli("--url", url, *args)
        assert done.exit_code == 0, (args, done.stderr)
    assert "hello" in cli("--url", url, "show", "x").stdout
    assert '"name":"cp"' in cli("--url", url, "export").stdout


def test_a_read_only_file_can_be_read(tmp_path: Path) -> None:
    url = filled(tmp_path / "x.db")
    before = (tmp_path / "x.db").read_bytes()
    with immutable(tmp_path / "x.db"):
        reads_work(url)
    assert (tmp_path / "x.db").read_bytes() == before


@pytest.mark.parametrize("log", [False, True])
def test_a_database_in_a_read_only_folder_can_be_read(tmp_path: Path, log: bool) -> None:
    """SQLite cannot create the -shm file a WAL database is read through: with no
    write-ahead log left, or an empty one (every change merged, the file kept: a
    crash after a checkpoint, or a persistent log), the file is read as immutable."""
    url = filled(tmp_path / "x.db")
    if log:
        (tmp_path / "x.db-wal").touch()
    before = contents(tmp_path)
    assert sorted(before) == ["x.db", "x.db-wal"][: 1 + log]
    with immutable(tmp_path, tmp_path / "x.db"):
        reads_work(url)
    assert contents(tmp_path) == before


def test_a_read_only_folder_with_unmerged_changes_is_a_clear_error(tmp_path: Path) -> None:
    """A write-ahead log still holding changes cannot be read without a -shm file:
    reading the file alone would show stale data, so it is refused, in one line."""
    live = tmp_path / "live"
    live.mkdir()
    url = filled(live / "x.db")
    copy = tmp_path / "copy"
    copy.mkdir()
    writer = sqlite3.connect(live / "x.db", isolation_level=None)
    try:  # a writer that has not merged its log yet, copied as a crash leaves it
        writer.execute("SELECT count(*) FROM sqlite_master")  # joins the log: kept open
        with memvault.open(url) as store:
            store.session("x").append([Message.user("unmerged")])
        for name in ("x.db", "x.db-wal"):
            shutil.copy(live / name, copy / name)
    finally:
        writer.close()
    assert (copy / "x.db-wal").stat().st_size > 0
    with immutable(copy):
        for args in READS:
            one_line_error(
                cli("--url", f"sqlite:///{copy}/x.db", *args),
                f"cannot read {str(copy / 'x.db')!r} read-only: its folder is "
                "read-only and 'x.db-wal' holds changes not yet merged into it "
                "(SQLite needs a -shm file beside it to read them): open it once "
                "where it is writable, or copy the folder somewhere writable",
            )


def test_a_database_on_a_read_only_mount_can_be_read(tmp_path: Path) -> None:
    """The folder on a read-only file system (EROFS, not EPERM): a read-only bind
    mount of it, in a private mount namespace so nothing outside the test sees it."""
    url = filled(tmp_path / "x.db")
    before = contents(tmp_path)
    reads = " && ".join(
        f"{shlex.quote(sys.executable)} -m memvault --url {shlex.quote(url)} "
        f"{' '.join(map(shlex.quote, args))} >/dev/null"
        for args in READS
    )
    folder = shlex.quote(str(tmp_path))
    script = (
        f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder}"
        f" && ! touch {folder}/probe 2>/dev/null && {reads}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert contents(tmp_path) == before
