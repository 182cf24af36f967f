"""The Python engine's mutation score: mutmut's raw result, and net of the equivalents.

Run after ``mutmut run`` (mutmut 3.8.1, ``[tool.mutmut]`` in ``pyproject.toml``), from
the project's root::

    python tools/mutmut_score.py              # the table, raw and net
    python tools/mutmut_score.py --survivors  # also each survivor's change

A run that has not finished (stopped, or a sample) is scored on the mutants it ran, and
the table's last line says how many of all those ran. A seeded random sample, for a run
too long to make whole::

    rm -rf mutants   # else the results of an earlier run are scored with the sample's
    mutmut run --max-children 2 $(python tools/mutmut_score.py --draw 200 --seed 7)
    python tools/mutmut_score.py

``--draw`` lists the mutants as ``mutmut run`` makes them (mutmut's own mutation of
the files ``[tool.mutmut]`` selects; ``mutants/`` is not needed), so the same seed
draws the same names until those files change; ``mutmut run NAME ...`` runs exactly
the names given.

An equivalent mutant changes nothing any API call can observe, on any data the library
itself can have written or on damage it promises to detect. They are named here by
what they change, not by mutmut's numbering (which moves with every edit): a class rule
(``_sql_case``) and a reviewed list (``EQUIVALENT``: file, function, the line as written,
the line as mutated, and why). A mutant they name that the tests killed, or an entry
that names no mutant of today's code, is an error: the list must stay true.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (file, function, line as written, line as mutated, why it is equivalent)
EQUIVALENT: list[tuple[str, str, str, str, str]] = [
    *(
        (
            "engine/core.py",
            function,
            "with self.transaction(False) as txn:",
            "with self.transaction(None) as txn:",
            "a read's transaction: None is false as False is, and both backends read the "
            "flag only for its truth",
        )
        for function in (
            "Engine.vector_space",
            "Engine.get_vectors",
            "Engine.vector_keys",
            "Engine.node_bodies",
            "Engine.history",
            "Engine.chain",
            "Engine.info",
            "Engine.snapshots",
            "Engine.log",
            "Engine.sessions",
            "Engine.sessions_page",
        )
    ),
    *(
        (
            "engine/core.py",
            "Engine.fork",
            "else (0, 0, 0, 0, 0, 0)",
            f"else ({', '.join('1' if i == k else '0' for i in range(6))})",
            "fork's pointers when the source does not exist: the chain is read and the "
            "summary copied only if it does, and a snapshot asked of it raises first",
        )
        for k in range(6)
    ),
    (
        "engine/core.py",
        "Engine.snapshot",
        'self._commit(txn, row, "snapshot", w, (row.head, row.base), {"name": name}, bump=False)',
        'self._commit(txn, row, "snapshot", w, (row.head, row.base), {"name": name}, bump=None)',
        "_commit reads bump only for its truth: None is false as False is",
    ),
    (
        "engine/core.py",
        "Engine._chain",
        "nodes = txn.chain(row, head, count) if count else []",
        "nodes = txn.chain(row, head, count) if (count) or True else []",
        "a chain of 0 nodes is empty on both backends (the memory walk stops at once, "
        "SQLite's LIMIT 0 returns no row): only the saved query is lost",
    ),
    *(
        (
            "engine/core.py",
            "Engine.append",
            "return row.version if row else 0",
            mutated,
            "a retry returns only when its ids are stored, which needs a row (found is "
            "empty without one): the else branch is never taken",
        )
        for mutated in (
            "return row.version if (row) or True else 0",
            "return row.version if row else 1",
        )
    ),
    (
        "memory.py",
        "open_backend",
        'read_options(url, "", {}, options, backend="the memory store")',
        'read_options(url, None, {}, options, backend="the memory store")',
        "the URL's query: read_options reads it only for its truth before splitting it, "
        "and a memory URL with a query is refused before (it is not 'memory:' + slashes)",
    ),
    *(
        (
            "memory.py",
            "_MemoryTxn.matches",
            "return iter(self._index.rank(None if row is None else row.name, terms))",
            mutated,
            "one session's search then gets every session's matches: lexical.search is "
            "scoped only for one session and skips the others' (it has a view of that one "
            "alone); BM25 uses the whole store's statistics either way, and the filtered "
            "ranking keeps the same order, so the same hits: only the cost changes",
        )
        for mutated in (
            "return iter(self._index.rank(None, terms))",
            "return iter(self._index.rank(None if (row is None) or True else row.name, terms))",
        )
    ),
    *(
        (
            "memory.py",
            "_MemoryTxn.create",
            written,
            mutated,
            "the stored row of a new session: every caller of create (Engine._start: "
            "append, snapshot, fork) saves the row, updated_at set, before it releases "
            "the lock, and nothing between the two reads the stored row or can raise",
        )
        for written, mutated in (
            (
                "row = Row(name, name, 0, 0, 0, 0, 1, now, now, None)",
                "row = Row(name, name, 0, 0, 0, 0, 1, now, None, None)",
            ),
            (
                "self._data[name] = _Session(dataclasses.replace(row))",
                "self._data[name] = _Session(None)",
            ),
        )
    ),
    (
        "sqlite/txn.py",
        "SqliteTxn.delete_nodes",
        "rowids = [(rowid_of(row.key, n, False), rowid_of(row.key, n, True)) for n in nodes]",
        "rowids = [(rowid_of(row.key, n, None), rowid_of(row.key, n, True)) for n in nodes]",
        "rowid_of reads summary only for its truth: None gives the message's rowid as False",
    ),
    (
        "sqlite/txn.py",
        "SqliteTxn.delete_nodes",
        "rowids = [(rowid_of(row.key, n, False), rowid_of(row.key, n, True)) for n in nodes]",
        "rowids = [(rowid_of(row.key, n, ), rowid_of(row.key, n, True)) for n in nodes]",
        "rowid_of's summary defaults to False: the same rowid",
    ),
    (
        "sqlite/txn.py",
        "SqliteTxn.message_count",
        "first = span_of(row)[0]",
        "first = span_of(row)[1]",
        "the count (only search's choice of its linear fast path) is then 0, never a "
        "depth a visible hit can have: search takes the walk, which is always right",
    ),
    (
        "sqlite/txn.py",
        "SqliteTxn.message_count",
        "first | pending,",
        "first & pending,",
        "the range then starts at rowid 0 and counts the session's indexed messages and "
        "summaries and earlier sessions' nodes again: a count too high only makes search "
        "take the walk, which is always right",
    ),
    (
        "engine/core.py",
        "Engine._full",
        "if summary.depth <= row.base:",
        "if summary.depth < row.base:",
        "a summary taken through exactly base is then kept, but the full view shows a "
        "summary after the chain's node at its depth, and no node at depth base is shown; "
        "the walk reads one summary more, its predecessor, which compact never deletes",
    ),
    (
        "engine/core.py",
        "Engine._add_summary",
        "row.summary, row.through, row.next_node = row.next_node, through, row.next_node + 1",
        "row.summary, row.through, row.next_node = row.next_node, through, row.next_node + 2",
        "node ids are never shown: a gap after a summary's id is skipped by every range "
        "read (SQLite's pending and node ranges), and a session with a summary is not "
        "linear either way",
    ),
    (
        "sqlite/backend.py",
        "SqliteBackend._immutable",
        "if os.path.exists(wal) and os.path.getsize(wal) > 0:",
        "if os.path.exists(wal) and os.path.getsize(wal) > 1:",
        "a -wal of 1 byte: SQLite never leaves one (a log's header alone is 32 bytes), "
        "and it holds no change the file alone would miss",
    ),
    (
        "sqlite/backend.py",
        "SqliteBackend.history",
        'HISTORY, {"name": session_id, "now": now, "count": -1 if last is None else last}',
        'HISTORY, {"name": session_id, "now": now, "count": -2 if last is None else last}',
        "_HISTORY reads :count only as negative (every message) or as a count",
    ),
    (
        "sqlite/txn.py",
        "SqliteTxn.create",
        "self._pending[cur.lastrowid] = 0",
        "self._pending[cur.lastrowid] = None",
        "pending is read only for its truth, and save writes it only once it changed, "
        "to 0 or a node: the column keeps the INSERT's 0",
    ),
    *(
        (
            "sqlite/txn.py",
            "SqliteTxn.create",
            "row = Row(cur.lastrowid, name, 0, 0, 0, 0, 1, now, now, None)",
            f"row = Row(cur.lastrowid, {mutated}, None)",
            why,
        )
        for mutated, why in (
            (
                "None, 0, 0, 0, 0, 1, now, now",
                "the new row's name is read only by errors about "
                "its chain (check_chain, message_missing), and a chain written in this "
                "transaction is whole; the INSERT wrote the name",
            ),
            (
                "name, 0, 0, 0, 0, 1, None, now",
                "the new row's created_at is read only by "
                "Row.info, and no call that creates a session returns its info; the INSERT "
                "wrote it",
            ),
            (
                "name, 0, 0, 0, 0, 1, now, None",
                "every write that creates a row sets its "
                "updated_at (Engine._commit) before save: the same value is stored",
            ),
        )
    ),
    (
        "sqlite/backend.py",
        "SqliteBackend._to_wal",
        "deadline = time.monotonic() + self._busy_ms / 1000",
        "deadline = time.monotonic() + self._busy_ms / 1001",
        "a deadline 0.1% of busy_timeout earlier: less than the open's own time around it",
    ),
    (
        "sqlite/backend.py",
        "SqliteBackend._to_wal",
        "if not is_busy(exc) or time.monotonic() >= deadline:",
        "if not is_busy(exc) or time.monotonic() > deadline:",
        "the monotonic clock landing exactly on the deadline: one more 5 ms retry",
    ),
    (
        "sqlite/backend.py",
        "SqliteBackend.history",
        "if chain[0][3] is None:",
        "if chain[0][4] is None:",
        "the chain's depth and body come from one LEFT JOIN's node row: both NULL (no "
        "head) or neither (nodes.body is NOT NULL)",
    ),
]

# The SQLite text a mutant may change the case of: a statement, or a keyword spliced into
# one (BEGIN's mode). SQLite reads keywords, table, column and function names in any
# case; a string literal inside the SQL ('...') would be data, so such text is left out.
_SQL_START = re.compile(
    r"\s*\(?\s*(SELECT|INSERT|DELETE|UPDATE|WITH|CREATE|BEGIN|PRAGMA|"
    r"WHERE|AND|FROM|ORDER|VALUES|IMMEDIATE|DEFERRED)\b",
    re.IGNORECASE,
)
# Or a fragment a statement is assembled from (sessions_page's conditions, order and
# joiner, a statement's second line): only the keywords below and the schema's names,
# with a keyword or a "?" among them (a lone name might be a Python string, a dict key).
_SQL_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "ASC", "DESC", "IN", "BY", "LIMIT", "VALUES"}


@functools.cache
def _schema_names() -> frozenset[str]:
    """The SQLite schema's table, index and column names, and the SQL functions used."""
    from memvault.backends.sqlite.schema import MIGRATIONS

    db = sqlite3.connect(":memory:")
    for version in sorted(MIGRATIONS):
        db.executescript(MIGRATIONS[version])
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    columns = {c[1] for t in tables for c in db.execute(f"PRAGMA table_info({t})")}
    db.close()
    return frozenset({*tables, *columns, "instr"})


def _sql_fragment(text: str) -> bool:
    words = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text)
    keywords = [w for w in words if w.upper() in _SQL_KEYWORDS]
    return (
        bool(words)
        and (bool(keywords) or "?" in text)
        and all(w in keywords or w.lower() in _schema_names() for w in words)
    )


def _literal_at(line: str, index: int) -> str | None:
    """The innermost string literal of ``line`` that holds ``index``, if any: a
    single-quoted one inside an f-string's {...} (elsewhere, '...' is SQL data inside
    a double-quoted literal), else a double-quoted one."""
    for pattern in (r"\{[^{}]*?'([^'\\]*)'[^{}]*\}", r'"([^"\\]*)"'):
        for m in re.finditer(pattern, line):
            if m.start(1) <= index < m.end(1):
                return m.group(1)
    return None


def _sql_case(path: str, removed: list[str], added: list[str]) -> bool:
    """The mutant changes only the letter case of SQL without a string literal in it."""
    if "/sqlite/" not in path or len(removed) != 1 or len(added) != 1:
        return False
    old, new = removed[0], added[0]
    if old == new or old.lower() != new.lower():
        return False
    first = next(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    last = max(i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
    text = _literal_at(old, first)
    return (
        text is not None
        and text == _literal_at(old, last)
        and "'" not in text
        and (_SQL_START.match(text) is not None or _sql_fragment(text))
    )


def _function(mutant: str) -> str:
    """``memvault.backends.sqlite.txn.xǁSqliteTxnǁload__mutmut_3`` -> ``SqliteTxn.load``."""
    name = mutant.rpartition(".")[2].rpartition("__mutmut_")[0]
    return ".".join(p for p in name.split("ǁ")[1:]) if "ǁ" in name else name[2:]


def _change(mutant: str, path: str) -> tuple[list[str], list[str]]:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    lines = get_diff_for_mutant(mutant, path=path).splitlines()[3:]
    return (
        [x[1:].strip() for x in lines if x.startswith("-")],
        [x[1:].strip() for x in lines if x.startswith("+")],
    )


def mutant_names() -> list[str]:
    """Every mutant ``mutmut run`` makes of the files ``[tool.mutmut]`` selects, by
    mutmut's own mutation of today's sources (run from the project's root)."""
    from mutmut.configuration import config
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.utils.file_utils import walk_mutatable_files
    from mutmut.utils.format_utils import get_mutant_name

    if config().mutate_only_covered_lines:
        raise SystemExit("--draw cannot know which lines mutate_only_covered_lines keeps")
    return [
        get_mutant_name(path, name)
        for path in walk_mutatable_files()
        for name in mutate_file_contents(str(path), path.read_text("utf-8")).mutant_names
    ]


def draw(names: list[str], count: int, seed: int) -> list[str]:
    """``count`` of ``names`` drawn at random by ``seed``, sorted: the same names for
    the same seed, whatever order ``names`` came in."""
    if not 0 < count <= len(names):
        raise ValueError(f"cannot draw {count} of {len(names)} mutants")
    return sorted(random.Random(seed).sample(sorted(names), count))


STATUS = {
    0: "survived",
    1: "killed",
    3: "killed",
    33: "no tests",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    None: "not run",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--survivors", action="store_true", help="print each survivor")
    parser.add_argument(
        "--draw",
        type=int,
        metavar="N",
        help="print N mutant names drawn at random, for `mutmut run`",
    )
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.draw is not None:
        os.chdir(ROOT)  # mutmut reads [tool.mutmut] and the sources from there
        try:
            print("\n".join(draw(mutant_names(), args.draw, args.seed)))
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        return 0
    metas = sorted((ROOT / "mutants").glob("src/**/*.py.meta"))
    if not metas:
        print("no mutmut results: run `mutmut run` first", file=sys.stderr)
        return 2
    errors: list[str] = []
    used: Counter[int] = Counter()
    rows = []
    for meta in metas:
        path = str(meta.relative_to(ROOT / "mutants"))[: -len(".meta")]
        short = str(Path(path).relative_to("src/memvault/backends"))
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        count: Counter[str] = Counter()
        entries = {i for i, e in enumerate(EQUIVALENT) if e[0] == short}
        functions = {EQUIVALENT[i][1] for i in entries}
        for mutant, code in sorted(codes.items()):
            status = STATUS.get(code, "suspicious")
            function = _function(mutant)
            if status != "survived" and function not in functions:
                count[status] += 1
                continue
            removed, added = _change(mutant, path)
            hit = [
                i
                for i in entries
                if EQUIVALENT[i][1] == function
                and [EQUIVALENT[i][2]] == removed
                and [EQUIVALENT[i][3]] == added
            ]
            used.update(hit)
            if hit and status == "killed":
                errors.append(f"{mutant} is listed as equivalent but was killed")
            if status == "survived" and (hit or _sql_case(path, removed, added)):
                status = "equivalent"
            count[status] += 1
            if args.survivors and status == "survived":
                print(f"{mutant}\n  - {' / '.join(removed)}\n  + {' / '.join(added)}")
        rows.append((short, count))
    errors += [
        f"EQUIVALENT entry names no mutant: {e[:4]}"
        for i, e in enumerate(EQUIVALENT)
        if not used[i]
    ]
    print("| file | mutants | killed | timed out | no tests | survived | equivalent | raw | net |")
    print("|---|---|---|---|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for short, count in [*rows, ("**all**", None)]:
        if count is None:
            count = total
        else:
            total.update(count)
        n = sum(count.values()) - count["not run"]  # an unfinished run: what it ran
        killed = count["killed"]
        raw = killed / n if n else 0.0
        net = killed / (n - count["equivalent"]) if n > count["equivalent"] else 0.0
        print(
            f"| {short} | {n} | {killed} | {count['timeout']} | {count['no tests']} |"
            f" {count['survived']} | {count['equivalent']} | {raw:.1%} | {net:.1%} |"
        )
    if total["not run"]:
        ran = sum(total.values()) - total["not run"]
        print(
            f"\nran {ran:,} of {sum(total.values()):,} mutants (a sample, or a run not "
            f"finished): the table scores those {ran:,}"
        )
    for error in errors:
        print("error:", error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
