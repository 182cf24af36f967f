"""The import graph of ``src/memvault``: no cycle, and no backend importing upward.

Every import counts, also those inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).parents[2] / "src"
PACKAGE = SRC / "memvault"

# What a backend module may import from memvault besides memvault.backends itself:
# the low modules every layer shares.
BACKEND_MAY_IMPORT = {
    "memvault.errors",
    "memvault.messages",
    "memvault.model",
    "memvault.paging",  # page queries and cursors: imports errors and model only
    "memvault.sansio",
    "memvault.words",
    "memvault.backends",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The memvault modules ``name`` imports (``from a import b`` counts ``a.b`` when
    that is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_backends_import_only_low_modules() -> None:
    upward = {
        (name, dep)
        for name, deps in graph().items()
        if name.startswith("memvault.backends")
        for dep in deps
        if not any(dep == low or dep.startswith(low + ".") for low in BACKEND_MAY_IMPORT)
    }
    assert upward == set()


# A folder per backend; what each may import from memvault.backends besides its own
# folder and the modules every backend shares (the protocol, URL options, record
# decoding, the thread wrapper of a sync backend, the protocol over sans-I/O
# operations). Only the backends that run the operations in Python use the engine.
BACKEND_SHARED = {
    "memvault.backends",
    "memvault.backends.base",
    "memvault.backends.url",
    "memvault.backends.records",
    "memvault.backends.threaded",
    "memvault.backends.driven",
}
BACKEND_FOLDERS = {
    "engine": set(),
    "sqlite": {"engine"},
    "redis": set(),
    "postgres": set(),
}


def test_each_backend_folder_imports_only_its_own_and_the_shared_modules() -> None:
    crossing = set()
    for name, deps in graph().items():
        parts = name.split(".")
        if parts[:2] != ["memvault", "backends"] or len(parts) < 4:
            continue  # a top-level module of memvault.backends, or not a backend
        folder = parts[2]
        assert folder in BACKEND_FOLDERS, f"{name}: a backend folder the rules do not name"
        allowed = {folder, *BACKEND_FOLDERS[folder]}
        for dep in deps:
            if dep.startswith("memvault.backends.") and dep not in BACKEND_SHARED:
                if dep.split(".")[2] not in allowed:
                    crossing.add((name, dep))
    assert crossing == set()


def test_every_top_level_backend_module_is_shared_or_the_memory_backend() -> None:
    """A module at the top of memvault.backends is one every backend may use (and the
    rules above name it), or memory://, the reference model: a new backend gets a
    folder."""
    top = {n for n in graph() if n.startswith("memvault.backends.") and n.count(".") == 2}
    folders = {f"memvault.backends.{f}" for f in BACKEND_FOLDERS}
    assert top - folders - BACKEND_SHARED == {"memvault.backends.memory"}


def test_the_shared_backend_modules_import_no_backend() -> None:
    """The protocol and the helpers every backend shares stand below all of them."""
    edges = graph()
    for name in BACKEND_SHARED - {"memvault.backends"}:
        assert not {
            d for d in edges[name] if d not in BACKEND_SHARED and d.startswith("memvault.backends")
        }, name


def test_only_the_entry_points_import_the_commands() -> None:
    """memvault.cli.app (the commands) sits on top: the CLI's helpers, which the
    library and the toolkit use too, never import it."""
    importers = {n for n, deps in graph().items() if "memvault.cli.app" in deps}
    assert importers <= {"memvault.__main__"}


def test_the_version_is_written_once() -> None:
    """pyproject.toml reads it from the package; the installed metadata agrees."""
    import importlib.metadata

    import memvault

    pyproject = (SRC.parent / "pyproject.toml").read_text("utf-8")
    assert re.search(r"^version\s*=", pyproject, re.M) is None
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert importlib.metadata.version("memvault") == memvault.__version__


def test_the_license_is_the_full_mit_text() -> None:
    text = (SRC.parent / "LICENSE").read_text("utf-8")
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


def third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_torture_command_and_its_tools_need_no_pytest() -> None:
    """memvault.checks and memvault.torture run without pytest, and take nothing from
    the pytest toolkit (memvault.testing builds on memvault.checks, not the reverse)."""
    edges = graph()
    mods = modules()
    for name in edges:
        if name.startswith(("memvault.checks", "memvault.torture")):
            assert not {d for d in edges[name] if d.startswith("memvault.testing")}, name
            assert not third_party_imports(mods[name]) & {"pytest", "hypothesis", "syrupy"}, name


def test_no_doc_sends_the_reader_to_a_document_they_cannot_see() -> None:
    """The design document and the issues live outside the repository."""
    root = SRC.parent
    texts = [
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
        *sorted(PACKAGE.rglob("*.py")),
        *sorted(PACKAGE.rglob("*.sql")),
    ]
    cited = [
        str(p.relative_to(root))
        for p in texts
        if re.search(r"DESIGN\.md|the design\b|\bissue #?\d", p.read_text("utf-8"))
    ]
    assert cited == []
