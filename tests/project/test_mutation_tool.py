"""tools/mutate_scripts.py: the mutation catalogue of the Lua scripts and SQL functions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "mutate_scripts.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutate_scripts", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate_scripts"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


tool = _tool()


@pytest.mark.parametrize("target", sorted(tool.TARGETS))
def test_every_operator_makes_mutants_that_change_the_script(target: str) -> None:
    mutants = tool.catalogue(tool.TARGETS[target])
    assert {m.operator for m in mutants} >= {
        "relational", "logical", "negation", "boolean", "arithmetic", "constant", "deletion"}
    texts = {f: (tool.BACKENDS / f).read_text("utf-8") for f in tool.TARGETS[target].files}
    for m in mutants:
        assert texts[m.file][m.start:m.end] == m.original
        assert m.apply(texts[m.file]) != texts[m.file]
    assert [m.id for m in mutants] == list(range(1, len(mutants) + 1))


def test_each_equivalent_names_one_mutant_of_the_catalogue() -> None:
    """An entry of the equivalents list that no longer matches (the script changed
    under it) or matches twice would silently count or drop the wrong mutant."""
    sites: list[tuple[str, str, int, str]] = []
    for target in tool.TARGETS.values():
        texts = {f: (tool.BACKENDS / f).read_text("utf-8") for f in target.files}
        sites += [m.site(texts[m.file]) for m in tool.catalogue(target)]
    for entry in tool.EQUIVALENT:
        assert sites.count(entry[:4]) == 1, entry
        assert entry[4], entry


@pytest.mark.parametrize("target", sorted(tool.TARGETS))
def test_every_mutant_has_a_site_of_its_own(target: str) -> None:
    """The site is the equivalents list's key: a line the file holds twice (read.lua's
    `for i = 1, count do`) is named with its occurrence, so each of its mutants can be
    listed alone."""
    texts = {f: (tool.BACKENDS / f).read_text("utf-8") for f in tool.TARGETS[target].files}
    sites = [m.site(texts[m.file]) for m in tool.catalogue(tool.TARGETS[target])]
    assert len(set(sites)) == len(sites)
    text = "x = 1\nif a then\n  x = 1\nend\nx = 1\n"
    m = tool.Mutant(0, "f.lua", 3, "constant", "1", "0", text.index("1\nend"),
                    text.index("1\nend") + 1)
    assert m.site(text) == ("f.lua", "x = 1 (occurrence 2)", 4, "0")
    unique = tool.Mutant(0, "f.lua", 2, "negation", "if", "", 6, 8)
    assert unique.site(text) == ("f.lua", "if a then", 0, "")


def test_comments_and_string_literals_are_not_mutated() -> None:
    lua = "-- a == b and c\nlocal x = 'a == b' .. \"c < d\"\nif x == 1 then end\n"
    assert tool.masked(lua, "lua").count("==") == 1
    sql = "-- x = 1\nSELECT 'a = b', \"c=d\" WHERE x = 1;\n"
    assert tool.masked(sql, "sql").count("=") == 1


@pytest.mark.parametrize("target", sorted(tool.TARGETS))
def test_every_mutant_lies_in_a_unit_some_operation_reaches(target: str) -> None:
    t = tool.TARGETS[target]
    reached = tool.entries_reaching(t)
    for m in tool.catalogue(t):
        unit = next(u for u in reached if u.file == m.file and u.start <= m.start < u.end)
        assert reached[unit] or unit.name == "top", (m, unit)


def test_a_branch_is_reached_by_its_own_operation_only() -> None:
    reached = tool.entries_reaching(tool.TARGETS["redis"])
    pop = next(u for u in reached if u.file.endswith("write.lua") and u.name == "op:pop")
    assert reached[pop] == {("write", "pop")}


def test_a_mutant_the_reference_model_sees_is_killed(tmp_path: Path) -> None:
    """End to end, on a private redis-server: deleting append's commit is caught."""
    mutants = tool.catalogue(tool.TARGETS["redis"])
    victim = next(m for m in mutants if m.operator == "deletion"
                  and m.original.strip().startswith("commit(row, 'append'"))
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(TOOL), "redis", "--only", str(victim.id), "-k",
         "agrees_with_the_reference_model", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["counts"] == {"killed": 1}
    assert report["outcomes"][0]["killer"] == "test_agrees_with_the_reference_model"


def test_a_change_that_changes_nothing_survives() -> None:
    """The control: were every mutant killed by some fault of the harness (a server left
    dead, a test failing for its own reasons), a no-op mutant would be killed too."""
    script = f"""
import os, sys
sys.path.insert(0, {str(TOOL.parent)!r})
import mutate_scripts as t
os.chdir(t.ROOT)
target = t.TARGETS["redis"]
text = (t.BACKENDS / "redis_lua/write.lua").read_text("utf-8")
at = text.index("if op == 'append' then")
noop = t.Mutant(1, "redis_lua/write.lua", 1, "none", text[at:at + 2], text[at:at + 2], at, at + 2)
mutate = t.Mutate(target, "agrees_with_the_reference_model or snapshot", 60.0)
try:
    mutate.record()
    outcome = mutate.run(noop)
finally:
    mutate.close()
print("STATUS", outcome.status, outcome.killer, outcome.why)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert "STATUS survived" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
