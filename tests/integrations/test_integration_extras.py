"""Importing an integration without its framework names the extra to install."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from memvault import ConfigurationError


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("memvault.integrations.openai_agents", "agents", "memvault[openai-agents]"),
        ("memvault.integrations.langchain", "langchain_core", "memvault[langchain]"),
        ("memvault.integrations.langgraph", "langgraph", "memvault[langgraph]"),
        ("memvault.integrations.pydantic_ai", "pydantic_ai", "memvault[pydantic-ai]"),
        (
            "memvault.integrations.pydantic_ai_harness",
            "pydantic_ai_harness",
            "memvault[pydantic-ai-harness]",
        ),
        ("memvault.integrations.mcp", "mcp", "memvault[mcp]"),
    ],
)
def test_a_missing_framework_raises_configuration_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    # A None entry in sys.modules makes "import <framework>" raise ImportError,
    # as if the package were not installed; monkeypatch restores everything after.
    for name in [n for n in sys.modules if n == framework or n.startswith(framework + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ConfigurationError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        importlib.import_module(module)


def test_the_integrations_package_imports_without_any_framework(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for framework in (
        "agents",
        "langchain_core",
        "langgraph",
        "mcp",
        "pydantic_ai",
        "pydantic_ai_harness",
    ):
        monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, "memvault.integrations", raising=False)
    monkeypatch.delitem(sys.modules, "memvault.integrations._common", raising=False)
    importlib.import_module("memvault.integrations")
    importlib.import_module("memvault.integrations._common")


def test_the_cli_runs_without_the_mcp_sdk_and_its_mcp_command_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['mcp'] = None; sys.argv[1:] = {args!r}; "
        "from memvault.cli.app import main; main()"
    )
    listed = subprocess.run(
        [sys.executable, "-c", script.format(args=["--help"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0 and " mcp " in listed.stdout
    done = subprocess.run(
        [sys.executable, "-c", script.format(args=["mcp", "--url", "memory://"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ConfigurationError: memvault.integrations.mcp needs mcp")
    assert line.endswith("an optional dependency: pip install 'memvault[mcp]'")
