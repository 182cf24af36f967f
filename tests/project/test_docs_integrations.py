"""Every ``python`` code block of docs/integrations.md runs as written.

The blocks run in order, each in a fresh namespace, all in one temporary
directory (so their SQLite files land there), as a reader would run them. The
Agents SDK's default model provider is replaced by a model that answers without
the network, and tracing is off; the ``memvault`` command of the environment running
the tests is on ``PATH`` (for the MCP client's block), as in an activated virtualenv;
nothing else is changed.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from agents.items import ModelResponse
from agents.models.multi_provider import MultiProvider
from agents.tracing import get_trace_provider

from tests.support.agents_fakes import ScriptedModel, say

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)


class Replying(ScriptedModel):
    """Answers every call with one short text message."""

    def __init__(self) -> None:
        super().__init__([])

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.turns.append([say(f"msg_{len(self.inputs)}", "You are Wang.")])
        return await super().get_response(*args, **kwargs)


def test_the_doc_has_code_blocks() -> None:
    assert len(BLOCKS) >= 6


def test_the_doc_blocks_run_in_order_in_one_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # No trace export either (the SDK reads its env switch once per process).
    monkeypatch.setattr(get_trace_provider(), "_manual_disabled", True)
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: Replying())
    for number, block in enumerate(BLOCKS, 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # upstream deprecations are not the point here
            exec(compile(block, f"{DOC}, block {number}", "exec"), {"__name__": "__doc__"})
        printed = capsys.readouterr().out.splitlines()
        # A line "print(...)  # -> text" promises that the block prints "text".
        promised = re.findall(r"^\s*print\(.*# -> (.*)$", block, re.M)
        assert promised, number
        lines = iter(printed)
        for text in promised:
            assert any(line == text for line in lines), (number, text, printed)
