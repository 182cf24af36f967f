"""Opening stores: URLs, options, extras, redaction."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import ConfigurationError, Message
from memvault.operations import MAX_TTL
from memvault.urls import redact


@pytest.mark.parametrize(
    "url", ["", "nosuch://x", "sqlite://", "sqlite:///", "memory://x", "just-a-path.db"]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        memvault.open(url)


def test_default_url_is_env_then_local_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMVAULT_URL", raising=False)
    with memvault.open() as store:
        assert store.options.url == "sqlite:///memvault.db"
    assert (tmp_path / "memvault.db").exists()
    monkeypatch.setenv("MEMVAULT_URL", "memory://")
    with memvault.open() as store:
        assert store.options.url == "memory://"


@pytest.mark.parametrize(
    "options",
    [
        {"ttl": 0},
        {"ttl": -1},
        {"ttl": "5"},
        {"ttl": float("inf")},
        {"ttl": float("nan")},
        {"ttl": 1e12},
        {"writer": ""},
        {"limits": 3},
        {"durability": "sometimes"},
        {"no_such_option": 1},
        {"busy_timeout": -1},
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        memvault.open(f"sqlite:///{tmp_path}/x.db", **options)


def test_longest_ttl_round_trips(tmp_path: Path) -> None:
    """The longest accepted ttl still gives an expiry that info() can report."""
    with memvault.open(f"sqlite:///{tmp_path}/x.db", ttl=MAX_TTL) as store:
        s = store.session("s")
        s.append([Message.user("x")])
        info = s.info()
        assert info is not None and info.expires_at is not None
        assert info.expires_at.year >= 2100


def test_unknown_option_on_memory() -> None:
    with pytest.raises(ConfigurationError, match="unsupported option"):
        memvault.open("memory://", durability="full")


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend whose driver is not installed says which extra to install."""
    real_import = builtins.__import__

    def no_redis(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "redis" or name.startswith("redis."):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_redis)
    prefixes = ("redis.", "memvault.backends.redis.backend")
    for mod in [m for m in sys.modules if m == "redis" or m.startswith(prefixes)]:
        monkeypatch.delitem(sys.modules, mod)
    with pytest.raises(ConfigurationError, match=r"memvault\[redis\]"):
        memvault.open("redis://localhost:6379/0")


def test_redact_hides_passwords() -> None:
    assert redact("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert (
        redact("postgresql://u:p%40ss@h/db?sslmode=require")
        == "postgresql://u:***@h/db?sslmode=require"
    )
    assert redact("sqlite:///x.db") == "sqlite:///x.db"
    # an unencoded "/" in a password, but a port before a path keeps the URL readable
    assert redact("redis://:pw/x@h:1/0") == "redis://:***@h:1/0"
    assert redact("postgresql://h:5432/db?user=me@corp") == "postgresql://h:5432/db?user=me@corp"
    store = memvault.open("memory://")
    assert repr(store) == "Store('memory://')"


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("memory://", "the memory store"),
        ("sqlite:///{tmp}/x.db", "SQLite"),
        ("redis://127.0.0.1:1/0", "Redis"),
        ("postgresql://u@127.0.0.1:1/x", "PostgreSQL"),
    ],
)
def test_one_refusal_for_an_unknown_option(tmp_path: Path, url: str, backend: str) -> None:
    """Every backend refuses an option it does not take in the same words, before any
    file or connection is made."""
    url = url.format(tmp=tmp_path)
    with pytest.raises(ConfigurationError) as err:
        memvault.open(url, colour="blue")
    assert str(err.value).startswith(f"{url}: unsupported option 'colour'; {backend} takes")
    if backend in ("SQLite", "Redis"):  # the URL's query too (PostgreSQL's goes to libpq)
        with pytest.raises(ConfigurationError) as err:
            memvault.open(f"{url}?colour=blue")
        assert str(err.value).startswith(
            f"{url}?colour=blue: unsupported option 'colour'; {backend} takes"
        )
    assert list(tmp_path.iterdir()) == []


def test_a_backend_bug_raising_type_error_is_not_called_an_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A TypeError from inside a backend is that backend's bug, shown as it is, not
    an 'unsupported option' (the message is not parsed for the word "argument")."""
    from memvault.backends.sqlite import backend as sqlite

    def broken(*args: Any, **kwargs: Any) -> None:
        raise TypeError("unexpected keyword argument (a bug deep inside)")

    monkeypatch.setattr(sqlite.SqliteBackend, "_migrate", broken)
    with pytest.raises(TypeError, match="a bug deep inside"):
        memvault.open(f"sqlite:///{tmp_path}/x.db")
