"""Mutation testing of the code mutmut cannot see: the Redis Lua scripts and the
PostgreSQL functions.

Each mutant is one small change to one script (a comparison flipped, ``and`` for ``or``,
a ``not`` dropped, a constant or an arithmetic sign changed, a statement deleted). The
backend's sync contract class (for Redis also its model, damaged-data and session-index
tests, which reach stored formats the contract cannot, and the cluster's tests: its sync
contract class and the races of its session index; for PostgreSQL also the budget of a
compact step and tests/backends/test_postgres_races.py, two writers of one session
interleaved in one process, which a dropped FOR UPDATE loses) runs once clean in this process,
noting which operations each test calls, whether it wrote on a cluster, and how long it
takes. Then, for each mutant: memvault is made to send the mutated script (in memory:
the Lua text, or the SQL applied to each new schema); a mutant the server refuses to
load is *stillborn* and not counted; one listed in ``EQUIVALENT`` is not run and not
counted; the tests that call an operation reaching the changed code run in a pytest
process of their own (this module is its plugin and installs the mutant there), cheapest
killers first, until one fails. Code that runs on a Redis Cluster only (hint.lua, which
keeps the cluster's session index, and write.lua's fenced paths: ``mode_spans``) runs
only the cluster's tests; code that runs on a single server only, only the others. A
mutant is *killed* when a test fails, *timed out* when the run takes three times its
tests' clean time plus 30 s, twice (the second time with four times as long: a busy
machine is not a kill), counted as killed as mutmut does, and *survived* when every test
passes. Redis mutants run on a private redis-server and one private 3-primary cluster
shared by every mutant's run (``$MEMVAULT_TEST_REDIS_CLUSTER_URL``; each test empties
it), both started again after a timeout or while a looping script keeps them busy, so
such a script blocks nothing else; PostgreSQL runs get a ``statement_timeout``. (Running
each mutant as another pytest session inside one process was tried and dropped: some
tests fail in a second session of the same process, which killed every mutant, as the
no-op control test showed.)

The multi-process contract tests (and the lost-write checker's) are left out: their
worker processes would load the scripts unmutated from disk. So is the cluster's async
contract class: it runs the same scripts as its sync one.

    python tools/mutate_scripts.py redis --out mutation-redis.json
    python tools/mutate_scripts.py postgres --list           # the catalogue, nothing run
    python tools/mutate_scripts.py postgres --only 17 --only 40
    python tools/mutate_scripts.py postgres --sample 150 --seed 1   # an estimate, faster

Needs the servers the contract suite needs (PostgreSQL as in the README; ``redis-server``
on the PATH). The results are in docs/testing.md, "Mutation score".
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ROOT / "src" / "memvault" / "backends"


@dataclass(frozen=True)
class Target:
    name: str
    files: tuple[str, ...]  # relative to src/memvault/backends
    tests: tuple[str, ...]  # pytest node ids: the sync contract class, the backend's own
    lang: str  # "lua" or "sql"


TARGETS = {
    "redis": Target(
        "redis",
        (
            "redis/lua/common.lua",
            "redis/lua/read.lua",
            "redis/lua/write.lua",
            "redis/lua/index.lua",
            "redis/lua/hint.lua",
        ),
        (
            "tests/backends/test_contract_redis.py::TestRedis",
            "tests/backends/test_redis_model.py",
            "tests/backends/test_redis_corrupt.py",
            "tests/backends/test_redis_index.py",
            "tests/backends/test_redis_cluster.py",
        ),
        "lua",
    ),
    "postgres": Target(
        "postgres",
        ("postgres/sql/functions.sql",),
        (
            "tests/backends/test_contract_postgres.py::TestPostgres",
            "tests/backends/test_compact_steps.py::"
            "test_a_step_ends_once_its_sessions_held_the_node_budget[postgres]",
            "tests/backends/test_postgres_races.py",
        ),
        "sql",
    ),
}


# The Redis scripts: redis_ops' name of each -> its file, redis/lua/<file>.lua (each is
# sent with common.lua before it).
SCRIPTS = {"READ": "read", "WRITE": "write", "INDEX": "index", "HINT": "hint"}


@dataclass(frozen=True)
class Mutant:
    id: int
    file: str
    line: int
    operator: str
    original: str
    replacement: str
    start: int
    end: int

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]

    def site(self, text: str) -> tuple[str, str, int, str]:
        """Where the mutant is, in terms that outlive edits elsewhere in the file: the
        file, its line (stripped), the column in that stripped line, the replacement.
        A line the file holds more than once (stripped) is named with its occurrence,
        counted from the top: 'for i = 1, count do (occurrence 2)'."""
        first = text.rfind("\n", 0, self.start) + 1
        line = text[first : text.find("\n", self.start)]
        indent = len(line) - len(line.lstrip())
        name, lines = line.strip(), [x.strip() for x in text.splitlines()]
        if lines.count(name) > 1:
            name += f" (occurrence {lines[: text.count(chr(10), 0, first)].count(name) + 1})"
        return self.file, name, self.start - first - indent, self.replacement


# -- equivalent mutants: they cannot change what any caller sees -----------------------
# (file, the mutated line stripped, column in it, replacement, why it is equivalent).
# They are not run and not counted; docs/testing.md lists them. Performance-only changes
# are here only with that said. `python tools/mutate_scripts.py redis --list` shows
# each mutant's site.

EQUIVALENT: list[tuple[str, str, int, str, str]] = [
    (
        "redis/lua/common.lua",
        "for k = 1, math.min(left, want) do guess[k] = node - k + 1 end",
        8,
        "0",
        "also sets guess[0], which unpack() and # never read: the same HMGET",
    ),
    (
        "redis/lua/common.lua",
        "redis.call('HSET', key, unpack(flat, first, math.min(first + 2 * SLICE - 1, #flat)))",
        71,
        "+",
        "each slice one pair longer: the next slice sets that pair again, to the same value",
    ),
    *(
        (
            (
                "redis/lua/read.lua",
                "local head, top, count, base, summary, through = 0, 0, 0, 0, 0, 0",
                column,
                "1",
                f"fork_read's initial {name}: {why}",
            )
            for column, name, why in (
                (49, "head", "used only with no row and no snapshot, when count is 0: no walk"),
                (52, "top", "used only with no row and no snapshot, when count is 0: no walk"),
                (58, "base", "read only after `summary ~= 0`, and the initial summary is 0"),
                (61, "summary", "with the initial through (0) `through > base` is false anyway"),
                (64, "through", "read only after `summary ~= 0`, and the initial summary is 0"),
            )
        )
    ),
    (
        "redis/lua/common.lua",
        "local got = redis.call('HMGET', key, unpack(fields, first, math.min(first + SLICE - 1,",
        84,
        "0",
        "each HMGET slice one field longer: the next slice reads that field again "
        "into the same place",
    ),
    (
        "redis/lua/common.lua",
        "local got = redis.call('HMGET', key, unpack(fields, first, math.min(first + SLICE - 1,",
        82,
        "+",
        "each HMGET slice two fields longer (502 values, far below unpack's limit): "
        "the next slice reads those fields again into the same places",
    ),
    (
        "redis/lua/common.lua",
        "local links, used = redis.call('HMGET', LINKS, unpack(guess)), 0",
        63,
        "1",
        "chain's initial `used`: the first guess is the node itself, so the loop always "
        "sets used (or returns) before it is read",
    ),
    *(
        (
            (
                "redis/lua/common.lua",
                "if row.run and row.head - row.run + 1 >= count then",
                column,
                new,
                "performance only: newest() walks the chain instead of taking the "
                "run's shortcut for a length or two more; the walk reads the same nodes (on a "
                "damaged chain the same CorruptRecordError, its reason saying chain, not "
                "message)",
            )
            for column, new in ((34, "-"), (36, "0"), (38, ">"))
        )
    ),
    (
        "redis/lua/write.lua",
        "local stamp = string.format('%.0f', math.max(tonumber(clock()), "
        "(tonumber(r.stamp) or 0) + 1))",
        86,
        "1",
        "a session with no stamp yet gets max(clock, 2) instead of max(clock, 1): the "
        "server's clock in microseconds (about 1.8e15) is the larger either way",
    ),
    (
        "redis/lua/write.lua",
        "if reply == nil then reply = false end",
        29,
        "true",
        "no operation a cluster sends returns nothing from run(): only 'reindex' does, and "
        "a cluster's pages settle with 'fence' instead",
    ),
    (
        "redis/lua/hint.lua",
        "redis.call('ZADD', KEYS[1], 0, id)",
        28,
        "1",
        "the cluster's id order (kept by this line alone) gets score 1 for every id "
        "instead of 0: all alike, so the set is ordered by the ids' bytes the same, and "
        "its cursors carry no score",
    ),
    (
        "redis/lua/hint.lua",
        "if not held or stamp >= held then",
        21,
        ">",
        "an update carrying the stamp the index holds is ignored: two states of a "
        "session never share a stamp (each write's is above the last), but for a gone "
        "session's clock() in the very microsecond of its last stamp; that entry then "
        "stays until the first page meeting it, which leaves it out (the session is "
        "gone) and unindexes it with a later clock: the same pages",
    ),
    (
        "redis/lua/hint.lua",
        "return 1",
        7,
        "0",
        "the reply of hint.lua's 'apply' is never read: a write's update of the index "
        "(Afterward) and a page's settling both drop it",
    ),
    (
        "redis/lua/common.lua",
        "for i = 1, count do",
        8,
        "0",
        "newest() also sets nodes[0] and depths[0], which hmget() and every caller (1 to "
        "count) never read",
    ),
    (
        "redis/lua/common.lua",
        "return messages(row.head, row.depth, count, false)",
        44,
        "true",
        "performance only: the walk also cuts out message ids nobody reads",
    ),
    *(
        (
            "redis/lua/read.lua",
            "base, summary, through = snap[3], snap[8] or 0, snap[9] or 0",
            column,
            "1",
            "the default for a snapshot stored before summaries (both fields absent): with "
            "summary 0 through is never read, and with summary 1 through 0 is no more than "
            "base, so no summary either",
        )
        for column in (45, 59)
    ),
    (
        "redis/lua/write.lua",
        "if reached[node] and reached[node] <= base then break end",
        35,
        "<",
        "performance only: compact's walk goes on down a stretch an earlier walk "
        "already covered from the same base, marking the same nodes",
    ),
    (
        "redis/lua/write.lua",
        "if dropped > 0 then redis.call('LTRIM', LOG, dropped, -1) end",
        11,
        ">=",
        "with nothing to drop it sends LTRIM log 0 -1, which keeps the whole list",
    ),
    *(
        (
            "redis/lua/write.lua",
            "if not r.run or r.head ~= r.next - 1 then r.run = r.next end",
            column,
            new,
            "performance only: every append starts a new run at its first node, "
            "a valid (shorter) run, so reads walk the chain more often",
        )
        for column, new in ((33, "+"), (35, "0"))
    ),
    (
        "redis/lua/write.lua",
        "if not r.run or r.head ~= r.next - 1 then r.run = r.next end",
        3,
        "",
        "performance only: every append to a session with a run (start(), rollback "
        "and fork give each one) starts a new run at its first node, a valid (shorter) "
        "run; a session stored before runs gets none, so its reads walk the chain as "
        "they did",
    ),
    (
        "redis/lua/read.lua",
        "local bodies, depths = messages(head, depth, count, false)",
        52,
        "true",
        "performance only: the chain read's walk also cuts out message ids nobody reads",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            line,
            column,
            "1",
            "no summary is node 1 (summarize and fork store it after a message node), and "
            "with summary 0 through is 0 too, so `through > base` decides alone",
        )
        for line, column in (
            (
                "SELECT x.sid, x.head, x.depth, x.summary, x.through > x.base AND x.summary <> 0 "
                "AS shows,",
                78,
            ),
            ("+ CASE WHEN s.summary <> 0 AND s.through > s.base THEN 1 ELSE 0 END,", 25),
            (
                "CASE WHEN s.summary <> 0 AND s.through > s.base THEN s.through - s.base ELSE 0 "
                "END",
                23,
            ),
            ("IF v_undo AND NOT (v_row.summary <> 0 AND v_row.through > v_row.base) THEN", 36),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "JOIN behind b ON b.sid = p.sid WHERE p.summary <> 0",
        50,
        "1",
        "search_pending's summary walk: no summary is node 1 (summarize and fork store "
        "it after a message node), so no pointer is left out; the pointers 0 it lets in join "
        "no node (ids start at 1), and no node is 0 for the EXISTS to match",
    ),
    (
        "postgres/sql/functions.sql",
        "CASE WHEN s.summary <> 0 AND s.through > s.base THEN s.through - s.base ELSE 0 END",
        39,
        ">=",
        "info's summarized count: with through = base the THEN branch is "
        "through - base = 0, the ELSE branch's value",
    ),
    (
        "postgres/sql/functions.sql",
        "FROM behind b JOIN @schema@.nodes n ON n.sid = b.sid AND n.node > b.mark",
        64,
        ">=",
        "performance only: search_pending also returns the node at the watermark, indexed "
        "already, and search_index skips it (ON CONFLICT DO NOTHING)",
    ),
    (
        "redis/lua/index.lua",
        "if #found == 2 * count then return {1, got[i], got[i + 1], found} end",
        10,
        "~=",
        "the index script returns after each id it found but the count-th, and goes on "
        "past it: the client asks again from the last id it got, and page_of cuts a page "
        "to its limit, so the pages are the same (more calls)",
    ),
    (
        "redis/lua/write.lua",
        "if new then redis.call('ZADD', KEYS[7], 0, id) end",
        40,
        "1",
        "every id of the id order gets score 1 instead of 0: all alike, so the set is "
        "ordered by the ids' bytes the same, and its cursors carry no score",
    ),
    (
        "redis/lua/write.lua",
        "for k = 1, #ids do",
        8,
        "0",
        "append's stored-id loop also reads index 0 of ids and nodes, never set: nothing is added",
    ),
    (
        "redis/lua/index.lua",
        "if x ~= y then return x < y end",
        24,
        "<=",
        "x ~= y there, so x <= y is x < y",
    ),
    (
        "redis/lua/index.lua",
        "local got = redis.call(range, Z, rank, rank + step - 1, 'WITHSCORES')",
        53,
        "0",
        "each step reads one entry more, and the next call goes on after the last entry "
        "read (its position is the reply's last id), so the pages are the same",
    ),
    (
        "postgres/sql/functions.sql",
        "FROM (SELECT 1) one LEFT JOIN (",
        13,
        "0",
        "the one row's value is never read",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            line,
            column,
            "0",
            "EXISTS ignores what its subquery selects",
        )
        for line, column in (
            ("EXISTS (SELECT 1 FROM sums WHERE sums.sid = n.sid AND sums.node = n.node),", 15),
            ("SELECT 1 FROM @schema@.nodes n (occurrence 1)", 7),
            ("SELECT 1 FROM @schema@.nodes n (occurrence 2)", 7),
            ("OR EXISTS (SELECT 1 FROM @schema@.snapshots s WHERE s.sid = v_row.sid) THEN", 18),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "SET node = greatest(@schema@.search_marks.node, excluded.node);",
        11,
        "least",
        "performance only: a watermark that never rises makes every search read again "
        "the nodes indexed since it was set, and search_index skips them (ON CONFLICT DO "
        "NOTHING): the same index",
    ),
    (
        "postgres/sql/functions.sql",
        "OR v_row.next_node - 1 - v_row.depth = (",
        21,
        "0",
        "performance only: search takes a linear session (every node made is on the "
        "chain or an indexed summary) for a non-linear one and walks its chain; the "
        "other way round would need fewer nodes made than the chain and the indexed "
        "summaries hold",
    ),
    (
        "postgres/sql/functions.sql",
        "OR v_row.next_node - 1 - v_row.depth = (",
        0,
        "AND",
        "performance only: with no node off the chain (the first test) no summary is "
        "indexed either (summaries are nodes off the chain), so both tests hold there; "
        "elsewhere the first fails, and a session whose every node off the chain is an "
        "indexed summary is taken for non-linear and its chain walked (the walk finds "
        "the same hits); never the other way round",
    ),
    (
        "postgres/sql/functions.sql",
        "IF v_node.parent > 0 THEN",
        17,
        ">=",
        "_garbage also writes v_floor[0] for a first node (PostgreSQL extends the array "
        "below 1); no node is 0, so nothing reads it",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            "v_floor bigint[] := array_fill(NULL::bigint, "
            "ARRAY[greatest(p_row.next_node, 1)::integer]);",
            column,
            new,
            why,
        )
        for column, new, why in (
            (
                51,
                "least",
                "performance only: _garbage's arrays start one element long and "
                "grow as it assigns past their end (PL/pgSQL fills the gap with NULL, and "
                "reading past the end gives NULL too): the same floors, wants and result",
            ),
            (
                77,
                "0",
                "next_node is never below 1 (a session row starts at 1 and it only "
                "grows), so greatest(next_node, 0) is greatest(next_node, 1)",
            ),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "SELECT count(*), coalesce(avg(d.length), 1) INTO v_docs, v_avg "
        "FROM @schema@.search_docs d;",
        41,
        "0",
        "search's mean length when no document is indexed: v_avg is read only per "
        "posting, and a posting is never stored without its document (search_index writes "
        "both from the same rows; compact and _purge delete both), so nothing reads it",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            f"v_row := @schema@._lock(p_session, p_now, false); (occurrence {k})",
            42,
            "true",
            f"{name} locking with create: on a missing session it inserts a row, on an expired "
            "one it purges it (nodes, snapshots, events) and resets it to version 0, and then "
            f"{name} raises exactly as it does on the row of NULLs (same code and detail: "
            f"{what}), so the statement's rollback undoes the row and the purge",
        )
        for k, name, what in (
            (2, "summarize", "MV001 with version 0, else MV006: the fresh row has no node"),
            (4, "rollback", "MV004: the fresh row has no snapshot"),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "IF cardinality(v_dead) > 0 THEN",
        23,
        ">=",
        "performance only: with no dead node compact_step also runs its three DELETEs "
        "for `node = ANY ('{}')`, which match no row, and adds 0 to its count",
    ),
    (
        "postgres/sql/functions.sql",
        "EXIT WHEN done > 0 AND v_budget <= 0;",
        15,
        ">=",
        "compact_step's first session: done is 0 and v_budget is p_budget, which the "
        "client always sends positive (COMPACT_STEP_NODES), so `v_budget <= 0` decides "
        "alone there too",
    ),
    (
        "postgres/sql/functions.sql",
        "x.next_node - 1 = x.depth AND (",
        12,
        "+",
        "performance only: full_history never takes a session for linear (next_node + 1 "
        "never equals depth: node ids run past it) and walks its chain with _chain instead "
        "of reading the nodes above base as a range; a linear session's chain is those "
        "nodes, so the rows are the same. Only hand-made damage to a link the range read "
        "does not follow (a node made its own parent) shows: CorruptRecordError instead "
        "of the messages stored, as history() of the same session already raises",
    ),
    (
        "postgres/sql/functions.sql",
        "WHERE n.sid = x.sid AND n.node > x.base) = x.depth - x.base AS linear",
        51,
        "+",
        "performance only: full_history takes a session with a base above 0 for non-linear "
        "(at most depth - base nodes lie above base, never depth + base) and walks its "
        "chain with _chain: the same rows, as for next_node + 1 above",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            line,
            column,
            "+",
            f"performance only: search's {what}, so a session whose every node made is on "
            "its chain or an indexed summary may be taken for non-linear and walked (the "
            "walk finds the same hits, and raises only on a chain damaged by hand); "
            "never the other way round",
        )
        for line, column, what in (
            (
                "v_linear := v_row.next_node - 1 = v_row.depth",
                28,
                "first test never holds (next_node + 1 never equals depth); the second "
                "(next_node - 1 - depth indexed summaries) holds whenever it would have: "
                "with next_node - 1 = depth no node lies off the chain, so no summary is "
                "indexed and both sides are 0",
            ),
            *(
                (
                    "OR v_row.next_node - 1 - v_row.depth = (",
                    column,
                    "second test asks for two more indexed summaries than the nodes made off "
                    "the chain, which hold every summary: it never holds",
                )
                for column in (19, 23)
            ),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "SELECT count(*), coalesce(max(s.sid), 0) FROM @schema@.sessions s",
        38,
        "1",
        "compact_plan's last sid when no session is stored: compact then takes the sessions "
        "with 0 < sid <= 1: none, or the first session, created since, which it may then "
        "compact too (compacting a session is right at any time)",
    ),
    (
        "postgres/sql/functions.sql",
        "IF NOT v_linear AND cardinality(v_walked) < v_steps THEN",
        42,
        "<=",
        "performance only: search also walks on (to twice the depth a hit needs) when it "
        "has walked exactly as deep as this hit needs; the nodes walked already stay where "
        "they are, so v_walked[v_steps] is the same (the deeper walk raises only on a "
        "chain damaged by hand)",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            "WHERE x.next_node - 1 > coalesce(m.node, 0)",
            column,
            new,
            "performance only: search_pending also takes the sessions indexed up to their "
            "last node (and those with no node), which have no node above their watermark to "
            "return",
        )
        for column, new in ((22, ">="), (20, "0"), (18, "+"))
    ),
    (
        "postgres/sql/functions.sql",
        "WHERE s.name = p_session AND (s.expires_at IS NULL OR "
        "s.expires_at > p_now) (occurrence 5)",
        67,
        ">=",
        "node_bodies also reads a session expiring at exactly now: compact's vector sweep "
        "(vectors.reclaim) asks it only for the sessions sessions(now) has just listed as "
        "live at the same now (expires_at > now), and a write in between only sets a later "
        "expiry",
    ),
    (
        "postgres/sql/functions.sql",
        "RAISE EXCEPTION 'unknown order %', p_order USING ERRCODE = '22023';",
        -8,
        "        NULL;",
        "unreachable: every caller of sessions_page (Store, AsyncStore, "
        "the CLI and the UI call store.sessions_page) gets its PageQuery from "
        "paging.check_page, which refuses an order outside ORDERS before any I/O "
        "(tests/api/test_arguments.py); a PageQuery made by hand with another order "
        "still fails here (EXECUTE of a query with no key: a BackendError), as it fails "
        "on the other backends",
    ),
    *(
        (
            "postgres/sql/functions.sql",
            line,
            column,
            "=",
            f"performance only: search_pending marks {what} as a message, not a summary; "
            "search finds a visible summary through the session's own summary walk, not "
            "the mark, and a hidden one is hidden either way (the walk of the chain never "
            "meets a summary's node); the fewer indexed summaries make search take sessions "
            "with summaries for non-linear and walk them (the same hits; it raises only on "
            "a chain damaged by hand)",
        )
        for line, column, what in (
            ("JOIN behind b ON b.sid = p.sid WHERE p.summary <> 0", 47, "every summary"),
            ("WHERE n.parent <> 0", 15, "every summary no pointer names (one below another)"),
        )
    ),
    (
        "postgres/sql/functions.sql",
        "FROM behind b JOIN @schema@.nodes n ON n.sid = b.sid AND n.node > b.mark",
        53,
        "OR",
        "performance only: search_pending also pairs each session behind with the nodes "
        "of every session above its watermark, and with its own nodes indexed already: "
        "search_index drops a node paired with another session's created_at, indexes it "
        "rightly when the two were created in the same instant, and skips one indexed "
        "(ON CONFLICT DO NOTHING); its batches fill sooner (pairs, ordered by node), so "
        "indexing takes more calls, far more with thousands of sessions behind at once",
    ),
    (
        "redis/lua/read.lua",
        "if depth <= row.base then break end",
        9,
        "<",
        "the full view's summary walk also takes a summary at exactly base; the view looks "
        "up only depths above base, and the walk stops at the next one (only hand-made "
        "damage to that next one's link, which compact never removes, would show)",
    ),
    (
        "redis/lua/write.lua",
        "local generation = 0",
        19,
        "1",
        "a value nothing reads: on a single server the script returns run() before any "
        "read of the generation; on a cluster the next line sets it from ARGV first",
    ),
    (
        "redis/lua/index.lua",
        "if match == '' or string.find(got[i], match, 1, true) then",
        45,
        "0",
        "the same search: Lua 5.1's string.find takes a start of 0 as 1 (it subtracts 1 "
        "and clamps below 0 to the first byte)",
    ),
    (
        "redis/lua/write.lua",
        "if row.run and parent < row.run then row.run = parent end",
        22,
        "<=",
        "pop also sets the run's start to the new head when it already is the "
        "run's start: it assigns the value it holds",
    ),
    (
        "redis/lua/write.lua",
        "local nodes, broken = chain(row.head, row.depth, row.depth - depth + 1, false)",
        72,
        "true",
        "performance only: summarize's walk also cuts out each node's message id "
        "(one string.sub a node), which it never reads",
    ),
    *(
        (
            (
                file,
                line,
                22 if file.endswith("common.lua") else 14,
                "1",
                "no summary is node 1 (summarize and fork store it after a message node), and "
                "with summary 0 through is 0 too, so `through > base` decides alone",
            )
            for file, line in (
                ("redis/lua/common.lua", "return row.summary ~= 0 and row.through > row.base"),
                ("redis/lua/read.lua", "if summary ~= 0 and through > base then"),
            )
        )
    ),
    (
        "redis/lua/read.lua",
        "for i = 1, count do (occurrence 1)",
        8,
        "0",
        "the full view's loop also runs for i = 0: depths[0] and bodies[0] are never set "
        "(chain(), newest() and hmget() fill 1 to count), so it assigns nil to "
        "reply[#reply + 1] and reply[#reply + 2] (and at[nil] reads nil), which stores "
        "nothing",
    ),
    (
        "redis/lua/write.lua",
        "run = 1, summary = 0, through = 0, new = true}",
        6,
        "0",
        "a new session's run starting at node 0 instead of 1: newest() takes the run's "
        "shortcut when head - run + 1 >= count, and count <= depth <= head (node ids "
        "start at 1 and each exceeds its parent's), so head + 1 >= count exactly when "
        "head >= count; pop lowers run only below it (to 0 when it pops node 1: the same "
        "0), and an append after anything but the head's successor sets run anew",
    ),
    (
        "redis/lua/index.lua",
        "for i = 1, math.min(#a, #b) do",
        8,
        "0",
        "less() also compares byte 0: string.byte(s, 0) returns nothing, so x and y are "
        "both nil and the loop goes on to byte 1",
    ),
    (
        "redis/lua/index.lua",
        "return #a < #b",
        10,
        "<=",
        "less() gets there only when one id is a prefix of the other, and `<=` differs "
        "only for two equal ids; below() compares the position's id only with the ids "
        "tied at its key, and it is not one of them (had it been, the ZSCORE check "
        "returned already; a member has one score)",
    ),
]


def equivalent(mutant: Mutant, text: str) -> str | None:
    """Why ``mutant`` (of ``text``, its file's clean text) is equivalent, if it is listed."""
    site = mutant.site(text)
    return next((e[4] for e in EQUIVALENT if e[:4] == site), None)


# -- masking: operators are looked for outside comments and string literals --------------

_LUA_SKIP = re.compile(
    r"--\[(=*)\[.*?\]\1\]|--[^\n]*|\[(=*)\[.*?\]\2\]|'(?:\\.|[^'\\\n])*'"
    r'|"(?:\\.|[^"\\\n])*"',
    re.S,
)
_SQL_SKIP = re.compile(r"--[^\n]*|[Ee]?'(?:''|[^'])*'|\"(?:\"\"|[^\"])*\"", re.S)


def masked(text: str, lang: str) -> str:
    """``text`` with comments and literals blanked to spaces (offsets unchanged)."""
    pattern = _LUA_SKIP if lang == "lua" else _SQL_SKIP
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


# -- the catalogue ---------------------------------------------------------------------
# (operator name, pattern over the masked text, replacement for the matched text)

Rule = tuple[str, "re.Pattern[str]", Callable[[str], str]]


def _swap(pairs: dict[str, str]) -> Callable[[str], str]:
    lowered = {k.lower(): v for k, v in pairs.items()}

    def replace(found: str) -> str:
        new = lowered[found.lower()]
        return new.lower() if found.islower() else new

    return replace


def _const(value: str) -> Callable[[str], str]:
    return lambda _found: value


_BINARY = r"(?<=[\w\)\]] )[+-](?= )"  # a spaced binary + or - (never a sign or a comment)
_NUMBER = r"(?<![\w.])[01](?![\w.])"  # the constants 0 and 1

LUA_RULES: list[Rule] = [
    (
        "relational",
        re.compile(r"==|~=|<=|>=|(?<![<>=~])[<>](?!=)"),
        _swap({"==": "~=", "~=": "==", "<=": "<", ">=": ">", "<": "<=", ">": ">="}),
    ),
    ("logical", re.compile(r"\b(?:and|or)\b"), _swap({"and": "or", "or": "and"})),
    ("negation", re.compile(r"\bnot\s+"), _const("")),
    ("boolean", re.compile(r"\b(?:true|false)\b"), _swap({"true": "false", "false": "true"})),
    ("arithmetic", re.compile(_BINARY), _swap({"+": "-", "-": "+"})),
    ("constant", re.compile(_NUMBER), _swap({"0": "1", "1": "0"})),
]

SQL_RULES: list[Rule] = [
    (
        "relational",
        re.compile(r"<>|!=|<=|>=|(?<![<>=!:])=(?![=>])|(?<![<>=\-])[<>](?![=>])"),
        _swap({"=": "<>", "<>": "=", "!=": "=", "<=": "<", ">=": ">", "<": "<=", ">": ">="}),
    ),
    (
        "logical",
        re.compile(r"(?i)\b(?:and|or)\b(?!\s+replace\b)"),
        _swap({"AND": "OR", "OR": "AND"}),
    ),
    ("negation", re.compile(r"(?i)\bnot\s+"), _const("")),
    ("null-check", re.compile(r"(?i)\bis\s+null\b"), _const("IS NOT NULL")),
    ("boolean", re.compile(r"(?i)\b(?:true|false)\b"), _swap({"TRUE": "FALSE", "FALSE": "TRUE"})),
    ("order", re.compile(r"(?i)\b(?:asc|desc)\b"), _swap({"ASC": "DESC", "DESC": "ASC"})),
    (
        "extreme",
        re.compile(r"(?i)\b(?:greatest|least)\b"),
        _swap({"GREATEST": "LEAST", "LEAST": "GREATEST"}),
    ),
    ("lock", re.compile(r"(?i)\bfor\s+update\b"), _const("")),
    ("arithmetic", re.compile(_BINARY), _swap({"+": "-", "-": "+"})),
    ("constant", re.compile(_NUMBER), _swap({"0": "1", "1": "0"})),
]

# A statement deleted: Lua, a call on a line of its own; SQL, a data-changing or raising
# statement through its semicolon, replaced by a no-op.
_LUA_CALL = re.compile(r"(?m)^[ \t]*(?:redis\.p?call|[a-z_]+)\([^\n]*\)[ \t]*$")
_LUA_NOT_A_CALL = re.compile(r"^\s*(?:if|elseif|while|for|return|local|function|until)\b")
_SQL_STATEMENT = re.compile(r"(?im)^[ \t]*(?:update|insert|delete|perform|raise)\b[^;]*;")


def _deletions(text: str, mask: str, lang: str) -> Iterator[tuple[int, int, str]]:
    if lang == "lua":
        for m in _LUA_CALL.finditer(mask):
            line = m.group()
            if not _LUA_NOT_A_CALL.match(line) and line.count("(") == line.count(")"):
                yield m.start(), m.end(), m.group()[: len(m.group()) - len(line.lstrip())]
    else:
        for m in _SQL_STATEMENT.finditer(mask):
            indent = m.group()[: len(m.group()) - len(m.group().lstrip())]
            yield m.start(), m.end(), f"{indent}NULL;"


def catalogue(target: Target) -> list[Mutant]:
    """Every mutant of ``target``'s scripts, numbered in a stable order."""
    rules = LUA_RULES if target.lang == "lua" else SQL_RULES
    found: list[tuple[str, int, str, str, int, int]] = []
    for name in target.files:
        text = (BACKENDS / name).read_text("utf-8")
        mask = masked(text, target.lang)
        for operator, pattern, replace in rules:
            for m in pattern.finditer(mask):
                found.append((name, m.start(), operator, replace(m.group()), m.start(), m.end()))
        for start, end, replacement in _deletions(text, mask, target.lang):
            found.append((name, start, "deletion", replacement, start, end))
    found.sort(key=lambda f: (target.files.index(f[0]), f[1], f[2]))
    mutants = []
    for number, (name, _, operator, replacement, start, end) in enumerate(found, 1):
        text = (BACKENDS / name).read_text("utf-8")
        mutants.append(
            Mutant(
                number,
                name,
                text.count("\n", 0, start) + 1,
                operator,
                text[start:end],
                replacement,
                start,
                end,
            )
        )
    return mutants


# -- which operations reach a mutant ---------------------------------------------------
# A script is cut into top-level units: a function, an operation's branch
# (``if op == 'x'`` in Lua), or the rest ("top", run by every operation of its script).
# A mutant is run only against the tests that called an operation reaching its unit.

_LUA_UNIT = re.compile(r"(?m)^(?:local function (\w+)\(|(?:if|elseif) op == '(\w+)' then)")
_LUA_END = re.compile(r"(?m)^(?:end\b|elseif\b|local function\b)")
_SQL_UNIT = re.compile(r"(?m)^CREATE OR REPLACE FUNCTION @schema@\.(\w+)\(")
_SQL_END = re.compile(r"(?m)^(?:CREATE|DROP)\b")


@dataclass(frozen=True)
class Unit:
    file: str
    name: str  # "fn:<name>", "op:<name>" or "top"
    start: int
    end: int


def units(target: Target) -> list[Unit]:
    """Every top-level unit of ``target``'s scripts, with its span."""
    found: list[Unit] = []
    head, tail = (_LUA_UNIT, _LUA_END) if target.lang == "lua" else (_SQL_UNIT, _SQL_END)
    for file in target.files:
        raw = (BACKENDS / file).read_text("utf-8")
        text = masked(raw, target.lang)
        spans = []
        for m in head.finditer(raw):  # an operation's name is a string literal: unmasked
            if text[m.start()] == " ":
                continue  # inside a comment
            after = tail.search(text, m.end())
            stop = (
                after.end()
                if after and after.group().startswith("end")
                else (after.start() if after else len(text))
            )
            kind = "fn" if m.group(1) else "op"
            spans.append(Unit(file, f"{kind}:{m.group(1) or m.group(2)}", m.start(), stop))
        last = 0
        for span in spans:
            if span.start > last:
                found.append(Unit(file, "top", last, span.start))
            found.append(span)
            last = span.end
        found.append(Unit(file, "top", last, len(text)))
    return found


def call_sites(
    target: Target, all_units: list[Unit], texts: dict[str, str], caller: Unit
) -> Iterator[tuple[Unit, int]]:
    """The functions ``caller`` calls, each with the offset of a call: a Lua script
    calls its own functions and common.lua's (each script file has its own names)."""
    body = texts[caller.file][caller.start : caller.end]
    prefix = r"(?<![\w.])" if target.lang == "lua" else r"@schema@\."
    shared = [f for f in target.files if f.endswith("common.lua")]
    known = {
        u.name[3:]: u
        for file in (*shared, caller.file)
        for u in all_units
        if u.file == file and u.name.startswith("fn:")
    }  # its own file's win
    for name, callee in known.items():
        for m in re.finditer(prefix + re.escape(name) + r"\(", body):
            if not body[: m.start()].lower().endswith("function "):  # not its definition
                yield callee, caller.start + m.start()


def entries_reaching(target: Target) -> dict[Unit, set[tuple[str, str]]]:
    """For each unit, the entry points (script, operation) whose run can reach it."""
    all_units = units(target)
    texts = {f: masked((BACKENDS / f).read_text("utf-8"), target.lang) for f in target.files}
    calls = {u: {f for f, _ in call_sites(target, all_units, texts, u)} for u in all_units}
    by_function = {u.name[3:]: u for u in all_units if u.name.startswith("fn:")}

    def closure(start: list[Unit]) -> set[Unit]:
        seen: set[Unit] = set()
        todo = list(start)
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo.extend(calls[u])
        return seen

    reached: dict[Unit, set[tuple[str, str]]] = {u: set() for u in all_units}
    if target.lang == "lua":
        common = [u for u in all_units if u.file.endswith("common.lua") and u.name == "top"]
        for script in SCRIPTS.values():
            file = f"redis/lua/{script}.lua"
            tops = [u for u in all_units if u.file == file and u.name == "top"]
            for op in [u for u in all_units if u.file == file and u.name.startswith("op:")]:
                for u in closure([op, *tops, *common]):
                    reached[u].add((script, op.name[3:]))
            for u in closure([*tops, *common]):  # an operation with no branch of its own
                reached[u].add((script, "*"))
    else:
        for fn in by_function.values():
            for u in closure([fn]):
                reached[u].add(("sql", fn.name[3:]))
    return reached


# -- where a mutant's code runs: on a single server, on a cluster, or on both -----------
# write.lua runs with the session index's keys on a single server (INDEXED) and with the
# session's fence on a cluster (FENCED). Code under `if FENCED then`, or after a top-level
# `if not FENCED then return ... end`, runs on a cluster only; under `if INDEXED then`, on
# a single server only; a function all of whose calls lie in one mode's code, in that
# mode only. A mutant there runs only the tests of that mode (a cluster test is one that
# called hint.lua or a fenced write.lua: hint.lua's mutants run only those, as nothing
# else calls it).

MODES = {"FENCED": "cluster", "INDEXED": "single"}
_GUARD = re.compile(r"\bif (not )?(FENCED|INDEXED) then\b")
_BLOCK = re.compile(r"\b(?:if|function|do|repeat|end|until)\b")


def _block_end(text: str, start: int) -> int:
    """The offset just past the ``end`` closing the Lua block open at ``start``."""
    depth = 0
    for m in _BLOCK.finditer(text, start):
        if m.group() not in ("end", "until"):
            depth += 1
        elif depth == 0:
            return m.end()
        else:
            depth -= 1
    return len(text)


def mode_spans(target: Target) -> dict[str, list[tuple[int, int, str]]]:
    """Per file, the spans that run in one mode only: (start, end, mode)."""
    all_units = units(target)
    texts = {f: masked((BACKENDS / f).read_text("utf-8"), target.lang) for f in target.files}
    spans: dict[str, list[tuple[int, int, str]]] = {f: [] for f in target.files}
    if target.lang != "lua":
        return spans
    for file, text in texts.items():
        for m in _GUARD.finditer(text):
            mode = MODES[m.group(2)]
            end = _block_end(text, m.end())
            if not m.group(1):
                spans[file].append((m.end(), end, mode))
                continue
            other = next(x for x in MODES.values() if x != mode)
            spans[file].append((m.end(), end, other))
            if text[m.end() : end].split()[0] == "return":  # at the top: the rest is `mode`'s
                spans[file].append((end, len(text), mode))
    while True:
        callers: dict[Unit, set[str | None]] = {}
        for u in all_units:
            for callee, at in call_sites(target, all_units, texts, u):
                callers.setdefault(callee, set()).add(mode_at(spans, u.file, at))
        only = [
            (f, {m for m in found if m})
            for f, found in callers.items()
            if None not in found and len(found) == 1 and mode_at(spans, f.file, f.start) is None
        ]
        if not only:
            return spans
        for f, (mode,) in only:
            spans[f.file].append((f.start, f.end, mode))


def mode_at(spans: dict[str, list[tuple[int, int, str]]], file: str, at: int) -> str | None:
    """The only mode the code at ``at`` runs in (None: both)."""
    inside = [s for s in spans[file] if s[0] <= at < s[1]]
    return max(inside)[2] if inside else None  # the innermost: the last to start


# -- running: one pytest session, every mutant in turn ------------------------------------


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, timeout, survived, stillborn, equivalent
    seconds: float
    killer: str | None = None
    why: str = ""  # the killing test's last line of failure (equivalent: the reason)


class PrivateRedis:
    """A redis-server of our own: a mutated script that never returns blocks only it."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--busy-reply-threshold",
                "500",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis-server did not start")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        """Alive (a busy one is found by the next mutant's script load)."""
        return self.alive()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


class PrivateCluster:
    """A Redis Cluster of our own (three primaries) for the cluster tests of every
    mutant: tests/support/redis.py's ``shared_cluster`` takes it from the environment,
    and each test empties it. Started again, on new ports, when it is down or busy."""

    def __init__(self) -> None:
        self.cluster: Any = None
        self.start()

    def start(self) -> None:
        from tests.support.redis import CLUSTER_URL

        from memvault.torture.servers import RedisCluster

        folder = Path(tempfile.mkdtemp(prefix="memvault-mutate-cluster-"))
        self.cluster = RedisCluster(folder, 3, durable=False)
        os.environ[CLUSTER_URL] = self.cluster.nodes[0].url

    def alive(self) -> bool:
        return all(
            node.process is not None and node.process.poll() is None for node in self.cluster.nodes
        )

    def ready(self) -> bool:
        """Every primary runs and answers (is not busy with a looping script)."""
        import redis

        if not self.alive():
            return False
        for node in self.cluster.nodes:
            client = redis.Redis(port=node.port, socket_timeout=2)
            try:
                client.ping()
            except redis.RedisError:
                return False
            finally:
                client.close()
        return True

    def stop(self) -> None:
        self.cluster.close()

    def restart(self) -> None:
        self.stop()
        self.start()


class Mutate:
    """Runs the contract tests once clean (noting what each calls and how long it takes),
    then, for each mutant, a fresh pytest session over the tests that reach it."""

    def __init__(self, target: Target, keyword: str | None, test_seconds: float) -> None:
        self.target = target
        # The multi-process tests' workers would load the scripts unmutated from disk;
        # the cluster's async contract runs the scripts as its sync one does.
        self.keyword = "not process and not lost_write and not TestRedisClusterAsync"
        if keyword:
            self.keyword = f"({self.keyword}) and ({keyword})"
        self.kills: Counter[str] = Counter()
        self.reached = entries_reaching(target)
        self.calls: dict[str, set[tuple[str, str]]] = {}  # test -> what it called
        self.cluster_tests: set[str] = set()  # the tests that wrote on a cluster
        self.spans = mode_spans(target)
        self.clean_seconds: Counter[str] = Counter()
        self.clean_failed: list[str] = []
        self.redis = PrivateRedis() if target.name == "redis" else None
        self.servers: list[PrivateRedis | PrivateCluster] = []
        if self.redis is not None:
            os.environ["MEMVAULT_TEST_REDIS_URL"] = self.redis.url
            self.servers = [self.redis, PrivateCluster()]
        # A runaway mutated function stops on the server too, not only in the client.
        os.environ["PGOPTIONS"] = f"-c statement_timeout={int(test_seconds * 1000)}"
        from memvault.backends.postgres import migrations as postgres_migrations
        from memvault.backends.redis import ops as redis_ops

        self.clean_scripts = {name: getattr(redis_ops, name) for name in SCRIPTS}
        self.clean_functions = postgres_migrations.functions
        self.clean = {f: (BACKENDS / f).read_text("utf-8") for f in target.files}

    def close(self) -> None:
        self._install(self.clean)
        for server in self.servers:
            server.stop()

    # -- applying a mutant in memory -------------------------------------------------

    def _install(self, texts: dict[str, str]) -> None:
        self.install(self.target, self.clean_scripts, self.clean_functions, self.clean, texts)

    @staticmethod
    def install(
        target: Target,
        scripts: dict[str, Any],
        functions: Callable[[], str],
        clean: dict[str, str],
        texts: dict[str, str],
    ) -> None:
        """Make memvault send ``texts`` (the scripts, one of them mutated, or all clean);
        ``scripts``: the clean ``redis_ops`` script of each name in SCRIPTS."""
        if target.name == "redis":
            from memvault.backends.redis import ops as redis_ops

            common = texts["redis/lua/common.lua"]
            for name, script in scripts.items():
                file = f"redis/lua/{SCRIPTS[name]}.lua"
                text = f"{script.text.split(chr(10), 1)[0]}\n{common}\n{texts[file]}"
                setattr(
                    redis_ops,
                    name,
                    script
                    if text == script.text
                    else redis_ops.Script(text, hashlib.sha1(text.encode("utf-8")).hexdigest()),
                )
        else:
            from memvault.backends.postgres import migrations as postgres_migrations

            body = texts["postgres/sql/functions.sql"]
            postgres_migrations.functions = (  # type: ignore[assignment]
                functions if body == clean["postgres/sql/functions.sql"] else lambda: body
            )

    def _compiles(self) -> bool:
        """Whether the server takes the mutated scripts (False: stillborn). A server that
        does not answer, or is still busy with the last mutant's looping script, says
        nothing of this mutant: the private redis-server is started again; PostgreSQL
        gone stops the run."""
        if self.target.name == "redis":
            import redis

            from memvault.backends.redis import ops as redis_ops

            assert self.redis is not None
            for _ in range(2):
                client = redis.Redis.from_url(self.redis.url)
                try:
                    for name in SCRIPTS:
                        client.script_load(getattr(redis_ops, name).text)
                    return True
                except redis.ResponseError as exc:
                    if not str(exc).startswith("BUSY"):
                        return False
                    self.redis.restart()  # a looping script of the last mutant runs on
                except redis.ConnectionError:
                    self.redis.restart()
                finally:
                    client.close()
            raise RuntimeError("the private redis-server does not answer")
        from tests.support.postgres import SERVER, drop_schema

        import memvault
        from memvault.errors import BackendUnavailableError

        schema = "mvtest_mut_" + uuid.uuid4().hex[:12]
        try:
            memvault.open(f"{SERVER}{'&' if '?' in SERVER else '?'}schema={schema}").close()
        except BackendUnavailableError:
            raise
        except Exception:
            return False
        finally:
            drop_schema(schema)
        return True

    # -- pytest sessions ---------------------------------------------------------------

    def _session(self, args: list[str], plugin: object) -> int:
        """One pytest session, its terminal output swallowed."""
        with contextlib.redirect_stdout(io.StringIO()):
            return int(pytest.main([*args, "-p", "no:cacheprovider", "-q"], plugins=[plugin]))

    def record(self) -> list[str]:
        """Run the tests clean, noting what each calls; returns their node ids."""
        import psycopg

        from memvault.backends.redis import ops as redis_ops

        mutate = self
        seen: set[tuple[str, str]] = set()
        clustered: list[bool] = []  # whether the running test wrote on a cluster
        scripts = {getattr(redis_ops, name).sha: script for name, script in SCRIPTS.items()}
        eval_, execute = redis_ops.Eval, psycopg.Connection.execute

        @dataclass(frozen=True)
        class Recorded(eval_):  # type: ignore[valid-type,misc]
            def __post_init__(self) -> None:
                script = scripts.get(self.script.sha, "other")  # other: not mutated
                # a fenced write (a cluster's: the session's keys and its fence) has its
                # generation before the operation; index.lua has no operations: any
                # of its calls reaches it
                fenced = script == "write" and len(self.keys) == len(redis_ops.SUFFIXES) + 1
                op = self.args[1 if fenced else 0]
                seen.add((script, op.decode() if isinstance(op, bytes) else str(op)))
                if fenced or script == "hint":
                    clustered.append(True)

        def recorded(conn: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(query, str) and "CREATE OR REPLACE FUNCTION" not in query:
                seen.update(("sql", n) for n in re.findall(r'"\.(\w+)\(', query))
            return execute(conn, query, *args, **kwargs)

        class Recorder:
            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
                seen.clear()
                clustered.clear()
                try:
                    return (yield)
                finally:
                    mutate.calls[item.nodeid] = set(seen)
                    if clustered:
                        mutate.cluster_tests.add(item.nodeid)

            def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
                mutate.clean_seconds[report.nodeid] += report.duration
                if report.failed:
                    mutate.clean_failed.append(report.nodeid)

        redis_ops.Eval = Recorded  # type: ignore[misc]
        psycopg.Connection.execute = recorded  # type: ignore[method-assign]
        try:
            self._session([*self.target.tests, "-k", self.keyword], Recorder())
        finally:
            redis_ops.Eval = eval_  # type: ignore[misc]
            psycopg.Connection.execute = execute  # type: ignore[method-assign]
        return sorted(self.calls)

    def _reaching(self, mutant: Mutant) -> list[str]:
        """The tests that call an operation reaching ``mutant``, on a server of the mode
        its code runs in: cheap killers first (kills per second of clean run; untried
        tests, the shortest first)."""
        unit = next(
            u for u in self.reached if u.file == mutant.file and u.start <= mutant.start < u.end
        )
        entries = self.reached[unit]
        wanted = {e for e in entries if e[1] != "*"}
        anything = {e[0] for e in entries if e[1] == "*"}
        mode = mode_at(self.spans, mutant.file, mutant.start)
        chosen = [
            t
            for t, calls in self.calls.items()
            if any(c in wanted or c[0] in anything for c in calls)
            and mode in (None, "cluster" if t in self.cluster_tests else "single")
        ]
        return sorted(
            chosen, key=lambda t: -(self.kills[t] + 0.5) / max(self.clean_seconds.get(t, 1.0), 0.05)
        )

    def run(self, mutant: Mutant) -> Outcome:
        """The mutant's tests in a pytest process of their own (this module as its plugin
        installs the mutant in memory there): no state carries over from another run."""
        started = time.monotonic()
        self._install({**self.clean, mutant.file: mutant.apply(self.clean[mutant.file])})
        try:
            if not self._compiles():
                return Outcome(mutant, "stillborn", time.monotonic() - started)
        finally:
            self._install(self.clean)
        tests = self._reaching(mutant)
        if not tests:
            return Outcome(mutant, "survived", time.monotonic() - started)
        limit = 30 + 3 * sum(self.clean_seconds.get(t, 0.0) for t in tests)
        env = {
            **os.environ,
            MUTANT: json.dumps(asdict(mutant)),
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
            ),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-rfE",
            "-p",
            "no:cacheprovider",
            "-p",
            Path(__file__).stem,
            *tests,
        ]
        # A busy machine can slow a run past the limit: a timeout counts only when a
        # second run, with four times the time, times out too. A run during which a
        # private server died (killed from outside) is no verdict: it runs again.
        allowed, deaths = [limit, 4 * limit], 0
        for server in self.servers:
            if not server.ready():
                server.restart()  # the cluster may be busy with the last mutant's loop
        while allowed:
            env.update({k: v for k, v in os.environ.items() if k.startswith("MEMVAULT_TEST")})
            try:
                done = subprocess.run(
                    command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=allowed[0]
                )
            except subprocess.TimeoutExpired:
                allowed.pop(0)
                for server in self.servers:
                    server.restart()  # it may still be running a looping script
                continue
            dead = [server for server in self.servers if not server.alive()]
            if not dead:
                break
            deaths += 1
            if deaths == 3:
                raise RuntimeError("a private Redis server keeps dying")
            for server in dead:
                server.restart()
        else:
            return Outcome(mutant, "timeout", time.monotonic() - started)
        seconds = time.monotonic() - started
        if done.returncode == 0:
            return Outcome(mutant, "survived", seconds)
        failed = [
            line.split()[1]
            for line in done.stdout.splitlines()
            if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
        ]
        if not failed:
            return Outcome(mutant, "killed", seconds, None, done.stdout.strip()[-300:])
        killer = failed[0]
        self.kills[killer] += 1
        why = next((line for line in done.stdout.splitlines() if line.startswith("E ")), "")
        return Outcome(mutant, "killed", seconds, killer.split("::")[-1], why[:300])


# -- in the pytest process of one mutant ---------------------------------------------

MUTANT = "MEMVAULT_MUTANT"  # the mutant (JSON) a run's pytest process installs


def pytest_configure(config: pytest.Config) -> None:
    """As the plugin of a mutant's pytest process: install the mutant in memory."""
    spec = os.environ.get(MUTANT)
    if not spec:
        return
    mutant = Mutant(**json.loads(spec))
    target = next(t for t in TARGETS.values() if mutant.file in t.files)
    from memvault.backends.postgres import migrations as postgres_migrations
    from memvault.backends.redis import ops as redis_ops

    clean = {f: (BACKENDS / f).read_text("utf-8") for f in target.files}
    Mutate.install(
        target,
        {name: getattr(redis_ops, name) for name in SCRIPTS},
        postgres_migrations.functions,
        clean,
        {**clean, mutant.file: mutant.apply(clean[mutant.file])},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument(
        "--only", type=int, action="append", help="run these mutant ids, in the order given"
    )
    parser.add_argument(
        "--sample", type=int, metavar="N", help="run N mutants drawn at random (seeded by --seed)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="print the catalogue, run nothing")
    parser.add_argument(
        "--test-seconds",
        type=float,
        default=30.0,
        help="PostgreSQL's statement_timeout in the mutants' runs (a mutant's "
        "run itself times out at 30 s plus three times its tests' clean time)",
    )
    parser.add_argument("--out", type=Path, help="write every outcome here (JSON)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="start no mutant after this many minutes (the rest are not run)",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        default=None,
        help="only the contract tests matching this pytest -k expression",
    )
    args = parser.parse_args(argv)
    target = TARGETS[args.target]
    mutants = catalogue(target)
    if args.only:  # in the order given: a drawn list stopped by --minutes stays random
        by_id = {m.id: m for m in mutants}
        mutants = [by_id[i] for i in dict.fromkeys(args.only) if i in by_id]
    if args.sample is not None and args.sample < len(mutants):
        # in the drawn order: a run stopped by --minutes is still a random sample
        mutants = random.Random(args.seed).sample(mutants, args.sample)
    texts = {f: (BACKENDS / f).read_text("utf-8") for f in target.files}
    if args.list:
        for m in mutants:
            _, line, column, _ = m.site(texts[m.file])
            why = equivalent(m, texts[m.file])
            print(
                f"{m.id:4} {m.file}:{m.line} {m.operator}: {m.original.strip()!r} -> "
                f"{m.replacement.strip()!r} (column {column} of {line[:60]!r})"
                f"{' EQUIVALENT: ' + why if why else ''}"
            )
        return 0
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))  # tests.support, as pytest has it (pythonpath)
    mutate = Mutate(target, args.keyword, args.test_seconds)
    outcomes: list[Outcome] = []
    try:
        started = time.monotonic()
        tests = mutate.record()
        if mutate.clean_failed or not tests:
            print(f"the tests fail (or none ran) without any mutant: {mutate.clean_failed}")
            return 2
        print(
            f"{target.name}: {len(mutants)} mutants, {len(tests)} tests, "
            f"clean run {time.monotonic() - started:.1f} s",
            flush=True,
        )
        for n, mutant in enumerate(mutants, 1):
            if args.minutes and time.monotonic() - started > 60 * args.minutes:
                print(f"stopped after {args.minutes} minutes: {n - 1} of {len(mutants)} run")
                break
            why = equivalent(mutant, texts[mutant.file])
            outcome = Outcome(mutant, "equivalent", 0.0, None, why) if why else mutate.run(mutant)
            outcomes.append(outcome)
            print(
                f"[{n}/{len(mutants)}] #{mutant.id} {outcome.status:9} "
                f"{mutant.file}:{mutant.line} {mutant.operator} "
                f"{mutant.original.strip()[:40]!r} -> {mutant.replacement.strip()[:40]!r} "
                f"({outcome.seconds:.1f} s{', ' + outcome.killer if outcome.killer else ''})",
                flush=True,
            )
    finally:
        mutate.close()
    counts = Counter(o.status for o in outcomes)
    killed = counts["killed"] + counts["timeout"]
    scored = killed + counts["survived"]
    score = killed / scored if scored else 0.0
    print(
        f"{target.name}: {dict(counts)}; score {score:.1%} ({killed} of {scored}; "
        f"stillborn and equivalent not counted)"
    )
    for o in outcomes:
        if o.status == "survived":
            m = o.mutant
            print(
                f"  survived #{m.id} {m.file}:{m.line} {m.operator}: "
                f"{m.original.strip()!r} -> {m.replacement.strip()!r}"
            )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "target": target.name,
                    "counts": dict(counts),
                    "score": score,
                    "outcomes": [
                        {
                            **asdict(o.mutant),
                            "status": o.status,
                            "killer": o.killer,
                            "why": o.why,
                            "seconds": round(o.seconds, 2),
                        }
                        for o in outcomes
                    ],
                },
                indent=1,
            )
            + "\n"
        )
    return 0 if counts["survived"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
