"""The docs and docstrings name only what exists: every dotted ``memvault.…`` name in
README.md, docs/*.md and the package's sources resolves to a module or an attribute.
Failing: a name left behind by a move (``memvault.search.body_words`` stayed in three
docstrings after the words moved to ``memvault.words``)."""

from __future__ import annotations

import importlib
import re
import typing
from pathlib import Path

ROOT = Path(__file__).parents[2]
REFERENCE = re.compile(r"(?<![\w/.-])memvault(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# Names that are not Python's: SQL in the schema memvault (a function, a setting), and
# a snapshot file's extension.
NOT_PYTHON = {"memvault.append", "memvault.schema_before", "memvault.json"}


def resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_every_dotted_name_resolves() -> None:
    texts = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "src" / "memvault").rglob("*.py")),
    ]
    missing = sorted(
        {
            (str(path.relative_to(ROOT)), name)
            for path in texts
            for name in {m.group(0) for m in REFERENCE.finditer(path.read_text("utf-8"))}
            if name not in NOT_PYTHON and not resolves(name)
        }
    )
    assert missing == []


def test_the_checker_finds_a_name_that_is_gone() -> None:
    assert resolves("memvault.words.body_words") and resolves("memvault.backends.base")
    assert not resolves("memvault.search.body_words")


def test_the_redis_docs_count_what_the_code_has() -> None:
    """The ops docstring names every request type an operation yields (it named 3 of
    6), and README counts the Lua scripts (it said two; there are four)."""
    from memvault.backends.redis import ops

    assert ops.__doc__ is not None
    types = {kind.__name__ for kind in typing.get_args(ops.Request)}
    assert len(types) == 6
    assert {t for t in types if f":class:`{t}`" not in ops.__doc__} == set()
    lua = ROOT / "src" / "memvault" / "backends" / "redis" / "lua"
    scripts = {p.stem for p in lua.glob("*.lua")} - {"common"}  # common: prepended to each
    assert scripts == {"read", "write", "index", "hint"}
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "one call of a Lua script (four:" in readme
