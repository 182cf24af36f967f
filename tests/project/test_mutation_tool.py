"""tools/mutate_scripts.py: the mutation catalogue of the Lua scripts and SQL functions."""

from __future__ import annotations

import ast
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
        "relational",
        "logical",
        "negation",
        "boolean",
        "arithmetic",
        "constant",
        "deletion",
    }
    texts = {f: (tool.BACKENDS / f).read_text("utf-8") for f in tool.TARGETS[target].files}
    for m in mutants:
        assert texts[m.file][m.start : m.end] == m.original
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
    m = tool.Mutant(
        0, "f.lua", 3, "constant", "1", "0", text.index("1\nend"), text.index("1\nend") + 1
    )
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


def test_each_script_calls_its_own_functions() -> None:
    """hint.lua and write.lua each define an ``unindex``: each script's calls reach
    its own (hint.lua's only from its 'apply'), never the other's."""
    reached = tool.entries_reaching(tool.TARGETS["redis"])
    mine = {u.file: reached[u] for u in reached if u.name == "fn:unindex"}
    assert mine["redis/lua/hint.lua"] == {("hint", "apply")}
    assert {script for script, _ in mine["redis/lua/write.lua"]} == {"write"}


@pytest.mark.parametrize(
    ("line", "mode"),
    [  # "|": where in the line
        ("if FENCED then generation = tonumber(table.remove(ARGV, |1)) end", "cluster"),
        (
            "local stamp = string.format('%.0f', math.max(tonumber(clock()), (tonumber(r.stamp) "
            "or |0)",
            "cluster",
        ),  # in commit
        ("if |not row then return {clock()} end", "cluster"),  # entry(), called on a cluster
        ("return string.format('%.0f', tonumber(t[1]) * 1000000 |+", "cluster"),  # clock()
        ("if generation |<= fence then return {'fenced', fence} end", "cluster"),
        (
            "local gone = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', '(' .. now, 'LIMIT', |0",
            "single",
        ),  # prune()
        ("if expiry |== '' then expiry = NEVER end", "single"),
        ("if |not FENCED then return run() end", None),  # the guard itself: both modes
        ("if not FENCED then return |run() end", "single"),
        ("local FENCED = #KEYS |== 7", None),
        ("if #stored |== count then return {'ok', row.version} end", None),
    ],
)
def test_a_mutant_runs_the_tests_of_the_mode_its_code_runs_in(line: str, mode: str | None) -> None:
    target = tool.TARGETS["redis"]
    text = (tool.BACKENDS / "redis/lua/write.lua").read_text("utf-8")
    at = text.index(line.replace("|", "")) + line.index("|")
    assert tool.mode_at(tool.mode_spans(target), "redis/lua/write.lua", at) == mode


@pytest.mark.parametrize(
    ("file", "deleted", "keyword", "killer"),
    [
        (
            "write.lua",
            "commit(row, 'append'",
            "TestRedis and agrees_with_the_reference_model",
            "test_agrees_with_the_reference_model",
        ),
        (
            "hint.lua",
            "redis.call('ZADD', KEYS[1], 0, id)",
            "keeps_its_session_index_in_one_slot",
            "test_cluster_keeps_its_session_index_in_one_slot",
        ),
    ],
)
def test_a_mutant_the_tests_see_is_killed(
    tmp_path: Path, file: str, deleted: str, keyword: str, killer: str
) -> None:
    """End to end, on a private redis-server: deleting append's commit is caught; on
    the private cluster: hint.lua's 'apply' forgetting the id order is caught."""
    mutants = tool.catalogue(tool.TARGETS["redis"])
    victim = next(
        m
        for m in mutants
        if m.operator == "deletion"
        and m.file.endswith(file)
        and m.original.strip().startswith(deleted)
    )
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [
            sys.executable,
            str(TOOL),
            "redis",
            "--only",
            str(victim.id),
            "-k",
            keyword,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["counts"] == {"killed": 1}
    assert report["outcomes"][0]["killer"] == killer


@pytest.mark.parametrize(
    ("file", "anchor", "keyword"),
    [
        ("write.lua", "if op == 'append' then", "agrees_with_the_reference_model or snapshot"),
        ("hint.lua", "if op == 'apply' then", "cluster_keeps_its_session_index or a_writer_that"),
    ],
)
def test_a_change_that_changes_nothing_survives(file: str, anchor: str, keyword: str) -> None:
    """The control: were every mutant killed by some fault of the harness (a server left
    dead, a test failing for its own reasons), a no-op mutant would be killed too; a
    hint.lua one runs the cluster tests, on the private cluster."""
    script = f"""
import os, sys
sys.path.insert(0, {str(TOOL.parent)!r})
import mutate_scripts as t
os.chdir(t.ROOT)
target = t.TARGETS["redis"]
text = (t.BACKENDS / "redis/lua/{file}").read_text("utf-8")
at = text.index({anchor!r})
noop = t.Mutant(1, "redis/lua/{file}", 1, "none", text[at:at + 2], text[at:at + 2], at, at + 2)
mutate = t.Mutate(target, {keyword!r}, 60.0)
try:
    mutate.record()
    outcome = mutate.run(noop)
finally:
    mutate.close()
print("STATUS", outcome.status, outcome.killer, outcome.why)
print("TESTS", len(mutate._reaching(noop)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert "STATUS survived" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert int(done.stdout.split("TESTS ")[1]) >= 2  # it ran the tests it reaches


def _score_tool() -> ModuleType:
    path = ROOT / "tools" / "mutmut_score.py"
    spec = importlib.util.spec_from_file_location("mutmut_score", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mutmut_score_counts_only_case_changes_of_plain_sql_as_equivalent() -> None:
    """tools/mutmut_score.py's class rule: a letter-case change of SQLite text with no
    string literal in it is equivalent, a statement or a fragment of one (keywords and
    the schema's names only); of a literal inside SQL, of text that is not SQL, of a
    lone name, or outside the SQLite backend's modules (sqlite*.py), it is not."""
    score = _score_tool()
    src = "src/memvault/backends/sqlite/backend.py"
    line = 'self._db.execute("DELETE FROM vectors WHERE key = ?", (key,))'
    assert score._sql_case(src, [line], [line.replace("DELETE FROM", "delete from")])
    assert score._sql_case(
        "src/memvault/backends/sqlite/txn.py", [line], [line.replace("DELETE FROM", "delete from")]
    )
    assert not score._sql_case(
        "src/memvault/backends/engine/core.py", [line], [line.replace("DELETE FROM", "delete from")]
    )
    quoted = "self._one(\"SELECT 1 FROM sqlite_master WHERE name = 'vectors'\")"
    assert not score._sql_case(src, [quoted], [quoted.upper()])
    words = 'raise ConfigurationError("cannot read the store")'
    assert not score._sql_case(src, [words], [words.replace("cannot", "CANNOT")])
    assert not score._sql_case(src, [line], [line.replace("?", "1")])
    fragment = 'where.append("instr(name, ?) > 0")'  # keywords, the schema's names, "?"
    assert score._sql_case(src, [fragment], [fragment.replace("instr(name", "INSTR(NAME")])
    joined = "sql = f\"SELECT {key} FROM sessions WHERE {' AND '.join(where)} \""
    assert score._sql_case(src, [joined], [joined.replace("' AND '", "' and '")])
    quoted = "sql = f\"SELECT {key} FROM events WHERE op = 'append' \""
    assert not score._sql_case(src, [quoted], [quoted.replace("'append'", "'APPEND'")])
    lone = 'order = "name" if query.order == "id" else key'  # may be a Python string
    assert not score._sql_case(src, [lone], [lone.replace('"name"', '"NAME"')])
    other = 'mode = "rwc" if write else "ro"'  # no SQL word
    assert not score._sql_case(src, [other], [other.replace('"ro"', '"RO"')])
    prose = 'raise ValueError("name IS NULL or version is new")'  # not only SQL words
    assert not score._sql_case(src, [prose], [prose.replace("new", "NEW")])


def test_mutmut_score_draws_the_same_sample_for_the_same_seed() -> None:
    score = _score_tool()
    names = [f"memvault.backends.memory.x_f__mutmut_{i}" for i in range(1, 501)]
    sample = score.draw(names, 50, 7)
    assert sample == score.draw(list(reversed(names)), 50, 7)  # the seed decides, not order
    assert len(set(sample)) == 50 and set(sample) <= set(names) and sample == sorted(sample)
    assert score.draw(names, 50, 8) != sample
    assert sorted(score.draw(names, 500, 1)) == sorted(names)
    for count in (0, 501, -1):
        with pytest.raises(ValueError, match=f"cannot draw {count} of 500"):
            score.draw(names, count, 7)


def test_mutmut_score_draws_names_of_mutants_mutmut_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each drawn name is one ``mutmut run NAME`` finds: mutmut's name of a mutant of a
    function or method defined in a selected file."""
    pytest.importorskip("mutmut")
    score = _score_tool()
    monkeypatch.chdir(ROOT)
    names = score.mutant_names()
    assert len(set(names)) == len(names)
    for name in score.draw(names, 40, 7):
        module = name.partition(".x")[0]
        tree = ast.parse((ROOT / "src" / (module.replace(".", "/") + ".py")).read_text())
        defined = {
            f"{c.name}.{f.name}"
            for c in tree.body
            if isinstance(c, ast.ClassDef)
            for f in c.body
            if isinstance(f, ast.FunctionDef)
        }
        defined |= {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
        assert score._function(name) in defined, name
