"""The README's code runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_the_tour() -> None:
    assert len(python_blocks()) == 2


def test_sync_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As written, and again on the store the first run left."""
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[0], "README.md", "exec"), {})
    exec(compile(python_blocks()[0], "README.md", "exec"), {})
    import memvault

    with memvault.open("sqlite:///agent.db") as store:
        assert store.sessions() == ["user-42", "user-42-retry"]
        # trim(keep_last=50) kept everything: no change, no event
        assert [e.op for e in store.session("user-42").log()][-4:] == [
            "rollback",
            "summarize",
            "pop",
            "clear",
        ]


def test_async_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As written: a complete script (its own imports and asyncio.run)."""
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[1], "README.md", "exec"), {"__name__": "__main__"})
    import memvault

    with memvault.open("sqlite:///agent.db") as store:
        assert [m.content for m in store.session("user-42").history()][-1] == "hi"


def test_the_error_tree_names_every_public_error() -> None:
    """Every error class a user can meet is in the README's tree."""
    import memvault
    from memvault.integrations import _common

    errors = {
        obj
        for module in (memvault, _common)
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, memvault.MemvaultError)
    }
    tree = re.search(r"```text\nMemvaultError\n(.*?)```", README.read_text(), flags=re.S)
    assert tree is not None
    assert sorted(e.__name__ for e in errors if e.__name__ not in tree.group(0)) == []
