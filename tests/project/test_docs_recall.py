"""docs/recall.md's semantic search example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = (Path(__file__).resolve().parents[2] / "docs" / "recall.md").read_text(encoding="utf-8")


def test_the_embedder_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    match = re.search(r"<!-- example: recall-embedder -->\n```python\n(.*?)```", DOC, re.S)
    assert match, "the recall-embedder example is missing from docs/recall.md"
    monkeypatch.chdir(tmp_path)
    exec(compile(match.group(1), "docs/recall.md", "exec"), {})
    assert (tmp_path / "recall-example.db").exists()
