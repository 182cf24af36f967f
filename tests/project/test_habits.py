"""The habits CI enforces: the tree linted and formatted by ruff, the docs site builds
without a warning, and the wheel ships ``py.typed`` (the package's annotations are
its users' too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_the_tree_passes_ruff_check() -> None:
    done = run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_the_tree_is_formatted_by_ruff() -> None:
    done = run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """Every page of mkdocs.yml's nav builds, every link between pages resolves, and
    every page of docs/ is in the nav."""
    done = run("mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert 'not included in the "nav"' not in done.stderr, done.stderr


def test_the_wheel_ships_py_typed() -> None:
    from hatchling.builders.wheel import WheelBuilder

    shipped = {f.distribution_path for f in WheelBuilder(str(ROOT)).recurse_included_files()}
    assert "memvault/py.typed" in shipped
    assert "memvault/backends/redis/lua/write.lua" in shipped  # the check sees data files
