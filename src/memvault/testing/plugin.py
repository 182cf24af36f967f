"""The memvault pytest plugin (registered through the ``pytest11`` entry point).

Importing it costs only pytest: every memvault module a fixture or hook needs is
imported when that fixture or hook first runs, so a project that installs
memvault but never uses the toolkit pays nothing.

What it adds:

- the ``contract_guard`` test in every subclass of a contract part
  (see :mod:`memvault.testing.guard`);
- fixtures: ``memvault_url``, ``memvault_store``, ``seeded_store``, ``store_snapshot``;
- the marker ``memvault_seed(path)`` and the ini option ``memvault_seed``: the baseline
  ``seeded_store`` copies (a SQLite file, or a JSONL export);
- the option ``--memvault-url`` (ini ``memvault_url``): the store ``memvault_store``
  and JSONL seeds use (default: a fresh SQLite file per test).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SEED_MARKER = "memvault_seed"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memvault", "memvault testing toolkit")
    group.addoption(
        "--memvault-url",
        dest="memvault_url",
        default=None,
        help="store URL for memvault_store / seeded_store (JSONL seeds); "
        "default: a fresh SQLite file per test",
    )
    parser.addini("memvault_url", "default store URL for memvault_store / seeded_store", default="")
    parser.addini(
        "memvault_seed", "default baseline for seeded_store (.jsonl, .db, .sqlite)", default=""
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{SEED_MARKER}(path): the baseline store seeded_store starts from "
        "(a SQLite file, or a memvault JSONL export); relative to the test's file",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Before -k/-m deselection, so the guard sees everything the class defines.
    if "memvault.testing.contract.base" not in sys.modules:
        return  # no contract class can have been collected
    if any("::test" in arg for arg in config.args):
        return  # tests picked by node id (a rerun, a mutation run): not a certification
    from memvault.testing.guard import add_guards

    add_guards(items)


@pytest.fixture
def memvault_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store for this test: ``--memvault-url``, the ini
    ``memvault_url``, else a fresh SQLite file in ``tmp_path``. Override the fixture
    to point at your own backend."""
    url = request.config.getoption("memvault_url") or request.config.getini("memvault_url")
    return str(url) if url else f"sqlite:///{tmp_path}/memvault.db"


@pytest.fixture
def memvault_store(memvault_url: str) -> Iterator[Any]:
    """An open :class:`memvault.Store` on ``memvault_url``, closed after the test."""
    import memvault

    with memvault.open(memvault_url) as store:
        yield store


@pytest.fixture
def seeded_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store holding this test's own copy of a baseline.

    The baseline comes from ``@pytest.mark.memvault_seed(path)`` or the ini option
    ``memvault_seed``. A SQLite file (``.db``/``.sqlite``/``.sqlite3``) is copied;
    a JSONL export is imported into ``memvault_url`` (override that fixture to seed
    your backend). The test may change its copy freely.
    """
    from memvault.testing.seeds import open_seeded, seed_path

    marker = request.node.get_closest_marker(SEED_MARKER)
    path = seed_path(
        marker.args[0] if marker and marker.args else str(request.config.getini("memvault_seed")),
        request.path.parent,
    )
    url = request.getfixturevalue("memvault_url") if path.suffix == ".jsonl" else None
    store = open_seeded(path, tmp_path, url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def store_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` with the memvault state extension:
    ``assert store_snapshot == store`` (or ``== dump_state(store)``) compares the
    store's logical state with the committed baseline; ``--snapshot-update``
    rewrites it. A mismatch names the session and the missing, extra or changed
    messages, snapshots and events."""
    from memvault.testing.syrupy_ext import StoreStateExtension

    return snapshot.use_extension(StoreStateExtension)
