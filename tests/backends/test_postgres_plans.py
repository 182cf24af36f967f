"""PostgreSQL: every hot path stays index-bound whatever the planner's statistics say.

Autovacuum may be off, a store may have been analyzed when it was nearly empty (or
never), and a pooled connection keeps the plans PL/pgSQL made for its statements
while the tables were small. Here a connection plans every hot path on a nearly
empty store analyzed in that state; then the store grows, leaves dead rows behind
(deleted sessions, popped and rolled-back messages) and its statistics are
falsified (the tables claimed empty); then, on that same connection, the plan of
every statement the functions run is read with ``auto_explain`` (nested statements
included): none may read the nodes or events table sequentially.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import memvault
from memvault import Message
from memvault.backends.base import Write
from memvault.backends.postgres.calls import Call, Calls, Op
from memvault.messages import encode_message
from memvault.paging import ORDERS, PageQuery
from memvault.sansio import drive
from tests.support.postgres import admin, new_schema, url_for

SCAN = re.compile(r"Seq Scan on (nodes|events)\b")


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


@pytest.fixture
def explained() -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], list[str]]]:
    """A connection that reports the plan of every statement it runs, nested ones too."""
    plans: list[str] = []
    with admin() as conn:
        conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
        for setting in (
            "LOAD 'auto_explain'",
            "SET auto_explain.log_min_duration = 0",
            "SET auto_explain.log_nested_statements = on",
            "SET client_min_messages = log",
        ):
            conn.execute(setting)
        yield conn, plans


def _write() -> Write:
    return Write("plans", time.time(), None)


def _hot_paths(calls: Calls, round_: int) -> list[Op[Any]]:
    """One call of every per-session operation an agent makes (not compact: it reads
    everything by design)."""
    now = time.time()
    record = encode_message(Message.user("hot", id=f"hot{round_}"), 1 << 20)
    summary = encode_message(Message.system(f"summary {round_}"), 1 << 20)
    return [
        calls.append("big", [record], None, None, _write()),
        calls.history("big", 20, now),
        calls.info("big", now),
        calls.snapshot("big", f"cp{round_}", _write()),
        calls.rollback("big", f"cp{round_}", _write()),
        calls.summarize("big", summary, f"hot{round_}", None, _write()),
        calls.history("big", 5, now, full=True),
        calls.pop("big", _write()),
        calls.trim("small", 1000, "trim", _write()),
        calls.snapshots("big", now),
        calls.log("small", now),
        calls.chain("small", 2, 0, 20, now),
        calls.fork("small", f"fork{round_}", None, _write()),
        calls.delete(f"fork{round_}", now),
    ]


def _churn(url: str, schema: str) -> None:
    """Grow the store and leave dead rows, as tests, benchmarks and users do."""
    with memvault.open(url) as store:
        big = store.session("big")
        for k in range(4):
            big.append([Message.user(f"{k}-{i} " + "x" * 200) for i in range(1000)])
            big.snapshot(f"grown{k}")
            for _ in range(20):
                big.pop()
        for k in range(6):
            gone = store.session(f"gone{k}")
            gone.append([Message.user(f"{i} " + "y" * 200) for i in range(1000)])
            gone.delete()
    with admin() as conn:  # other sessions' rows, deleted: pages of dead rows
        conn.execute(
            f'INSERT INTO "{schema}".nodes (sid, node, parent, depth, msg_id, body)'
            " SELECT -g / 1000, g, g - 1, g, int8send(g), repeat('z', 200)"
            " FROM generate_series(1, 50000) g"
        )
        conn.execute(
            f'INSERT INTO "{schema}".events (sid, version, op, writer, at, head_before,'
            " base_before, head_after, base_after, detail) SELECT -g / 1000, g, 'append', '',"
            " 0, 0, 0, 0, 0, '{}' FROM generate_series(1, 50000) g"
        )
        for table in ("nodes", "events"):
            conn.execute(f'DELETE FROM "{schema}".{table} WHERE sid < 0')
    with admin() as conn:  # "empty", as a table analyzed before it was filled claims
        conn.execute(
            "UPDATE pg_class SET reltuples = 0, relpages = 1 WHERE oid = ANY (%s::regclass[])",
            ([f'"{schema}".{t}' for t in ("nodes", "events", "sessions")],),
        )


def _run(conn: psycopg.Connection[tuple[object, ...]], operations: list[Op[Any]]) -> None:
    for operation in operations:
        drive(operation, lambda call: call.parse(conn.execute(call.sql, call.params).fetchall()))


def test_hot_paths_never_scan_nodes_or_events(
    schema: str, explained: tuple[psycopg.Connection[tuple[object, ...]], list[str]]
) -> None:
    """Failing: a statement of a hot path that the planner may turn into a sequential
    scan of nodes or events when its statistics are stale (a recursive walk joined
    back to nodes, a lookup by something no index leads with)."""
    conn, plans = explained
    url = url_for(schema)
    with memvault.open(url) as store:
        store.session("big").append([Message.user("first", id="first")])
        store.session("small").append([Message.user("a"), Message.user("b")])
    with admin() as other:
        other.execute(f'ANALYZE "{schema}".nodes, "{schema}".events, "{schema}".sessions')
    calls = Calls(schema)
    for round_ in range(8):  # past the 5 custom plans: PL/pgSQL keeps a generic one
        _run(conn, _hot_paths(calls, round_))
    _churn(url, schema)
    plans.clear()
    for round_ in range(8, 11):
        _run(conn, _hot_paths(calls, round_))
    assert plans, "auto_explain reported no plan"
    scans = [p for p in plans if SCAN.search(p)]
    assert not scans, f"{len(scans)} of {len(plans)} plans scan a table:\n\n" + "\n\n".join(scans)


def test_session_pages_walk_an_index_whatever_the_statistics(
    schema: str, explained: tuple[psycopg.Connection[tuple[object, ...]], list[str]]
) -> None:
    """Every order, both ways, first page and later ones: an ordered index scan of the
    order's index, never a scan and sort of the sessions table (O(sessions) per page),
    even when the statistics claim the table is empty. Failing: sessions_page orders
    by an expression no index holds, or leaves the choice to the statistics."""
    conn, plans = explained
    with memvault.open(url_for(schema)) as store:
        for i in range(300):
            store.session(f"s{i:03}").append([Message.user("m")])
    with admin() as other:
        other.execute(f'ANALYZE "{schema}".sessions')
        other.execute(
            "UPDATE pg_class SET reltuples = 0, relpages = 1 WHERE oid = %s::regclass",
            (f'"{schema}".sessions',),
        )
    calls, now = Calls(schema), time.time()
    plans.clear()
    for order in ORDERS:
        for descending in (False, True):
            for after in (None, (None if order == "id" else 1, "s100")):
                query = PageQuery(11, order, descending, "", after)
                _run(conn, [calls.sessions_page(query, now)])
    pages = [p for p in plans if "Query Text: SELECT s.name" in p]
    assert len(pages) == 20, plans
    bad = [
        p
        for p in pages
        if "Seq Scan" in p
        or "Sort" in p
        or ("sessions_by_" not in p and "sessions_name_key" not in p)
    ]
    assert not bad, f"{len(bad)} of {len(pages)} plans do not walk an index:\n\n" + "\n\n".join(bad)


def test_compact_steps_read_each_session_through_an_index_without_jit(
    schema: str, explained: tuple[psycopg.Connection[tuple[object, ...]], list[str]]
) -> None:
    """compact_step reads one session at a time: through an index, and never through
    a JIT-compiled plan (JIT made to apply to every plan here). Failing: the
    planner's estimate for _garbage's recursive walk ran past jit_above_cost, and
    every session's walk was JIT-compiled (0.1-0.5 s a session on a 1M-message
    store, for ~1 ms of work)."""
    conn, plans = explained
    url = url_for(schema)
    _churn(url, schema)
    with memvault.open(url) as store:
        for k in range(3):
            s = store.session(f"s{k}")
            s.append([Message.user("a"), Message.user("b")])
            s.pop()
    conn.execute("SET jit = on")
    conn.execute("SET jit_above_cost = 0")
    plans.clear()
    steps = list(drive_steps(Calls(schema)))
    for call in steps:
        conn.execute(call.sql, call.params).fetchall()
    # the statements compact_step runs (the client's two calls are planned outside it)
    inside = [p for p in plans if not re.search(r"Query Text: SELECT \* FROM \S+\.compact_", p)]
    assert any(".nodes" in p for p in inside), "auto_explain reported no plan inside"
    assert not [p for p in inside if SCAN.search(p)]
    jitted = [p for p in inside if "JIT:" in p]
    assert not jitted, f"{len(jitted)} of {len(inside)} plans were JIT-compiled:\n\n" + "\n\n".join(
        jitted[:2]
    )


def drive_steps(calls: Calls) -> Iterator[Call[Any]]:
    """compact's calls, its plan answered by hand: every session in one step."""
    operation = calls.compact(0, time.time(), 1000, None)
    plan = next(operation)
    yield plan
    step = operation.send((10, 2**62))
    yield step


def test_search_never_runs_a_jit_compiled_plan(
    schema: str, explained: tuple[psycopg.Connection[tuple[object, ...]], list[str]]
) -> None:
    """search_pending, search_index and search (JIT made to apply to every plan here):
    no statement inside them is JIT-compiled. Failing: their estimates passed
    jit_above_cost and every call compiled for 1.1-1.8 s (load average 17) of
    sub-millisecond work."""
    conn, plans = explained
    with memvault.open(url_for(schema)) as store:
        store.session("s").append([Message.user(f"kiwi {i}") for i in range(50)])
    conn.execute("SET jit = on")
    conn.execute("SET jit_above_cost = 0")
    plans.clear()
    operation = Calls(schema).search(None, ["kiwi"], 10, False, time.time())
    call = next(operation)
    try:
        while True:
            call = operation.send(call.parse(conn.execute(call.sql, call.params).fetchall()))
    except StopIteration as done:
        assert len(done.value) == 10
    inside = [p for p in plans if not re.search(r"Query Text: SELECT \* FROM \S+\.search", p)]
    assert any(".search_postings" in p for p in inside), "auto_explain reported no plan inside"
    jitted = [p for p in inside if "JIT:" in p]
    assert not jitted, f"{len(jitted)} of {len(inside)} plans were JIT-compiled:\n\n" + "\n\n".join(
        jitted[:2]
    )
