"""Seeded stores: each test starts from its own copy of a realistic baseline.

A baseline is a SQLite file (``.db``, ``.sqlite``, ``.sqlite3``), copied as is, or
a JSONL export (:mod:`memvault.cli.transfer`), imported into any store.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import memvault
from memvault.cli.transfer import import_sessions

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def seed_path(name: str, base_dir: Path) -> Path:
    """The baseline ``name`` (absolute, or relative to ``base_dir``); it must exist."""
    if not name:
        raise FileNotFoundError(
            "seeded_store needs a baseline: @pytest.mark.memvault_seed"
            "('path') or the ini option memvault_seed"
        )
    path = Path(name)
    path = path if path.is_absolute() else base_dir / path
    if not path.is_file():
        raise FileNotFoundError(f"baseline {path} does not exist")
    if path.suffix not in (*SQLITE_SUFFIXES, ".jsonl"):
        raise ValueError(
            f"baseline {path}: expected a .jsonl export or a SQLite file "
            f"({', '.join(SQLITE_SUFFIXES)})"
        )
    return path


def copy_sqlite(baseline: Path, folder: Path) -> str:
    """Copy a SQLite baseline (and its WAL, if any) into ``folder``; returns its URL.

    The baseline itself is never opened, so it never changes.
    """
    target = folder / f"seed-{baseline.name}"
    shutil.copyfile(baseline, target)
    wal = baseline.with_name(baseline.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    return f"sqlite:///{target}"


def open_seeded(baseline: Path, folder: Path, url: str | None = None, **options: Any) -> Any:
    """Open a store holding a private copy of ``baseline``.

    Args:
        baseline: a SQLite file (copied into ``folder``) or a JSONL export.
        folder: where copies go (a test's ``tmp_path``).
        url: the empty store a JSONL export is imported into (default: a new
            SQLite file in ``folder``).
        **options: options for :func:`memvault.open`.
    """
    if baseline.suffix in SQLITE_SUFFIXES:
        return memvault.open(copy_sqlite(baseline, folder), **options)
    store = memvault.open(url or f"sqlite:///{folder}/seeded.db", **options)
    try:
        with baseline.open(encoding="utf-8") as lines:
            import_sessions(store, lines)
    except BaseException:
        store.close()
        raise
    return store


__all__ = ["copy_sqlite", "open_seeded", "seed_path"]
