"""Many processes on one PostgreSQL store: nothing lost, migrations applied once."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

import memvault
from memvault import ConflictError, Message
from memvault.backends.postgres.backend import migrate
from memvault.backends.postgres.migrations import latest, migrations
from memvault.testing import Opener
from memvault.testing.contract.concurrency import check_interleaving
from memvault.testing.workers import turn
from tests.support.postgres import admin, new_schema, url_for

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


def _append_after_barrier(
    opener: Opener, writer: str, turns: int, barrier: Any, results: Any
) -> None:
    store = opener(writer=writer)
    try:
        s = store.session("shared")  # nobody has created it yet: all race to
        barrier.wait()
        versions = [s.append(turn(writer, i)) for i in range(turns)]
        results.put((writer, versions))
    finally:
        store.close()


def _migrate_after_barrier(url: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        results.put(migrate(url).before)
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put(repr(exc))


def _run_all(target: Callable[..., None], args: list[tuple[Any, ...]]) -> list[Any]:
    """Start one process per args tuple (each gets a shared barrier and result queue
    appended), wait for all, return what they put."""
    barrier, results = SPAWN.Barrier(len(args)), SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(*a, barrier, results)) for a in args]
    for p in procs:
        p.start()
    out = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return out


@pytest.mark.slow
@pytest.mark.parametrize("face", ["sync", "async"])
def test_eight_processes_appending_to_one_new_session_lose_nothing(schema: str, face: str) -> None:
    """8 processes start together on a session none has created, 40 two-message
    turns each: every turn once, whole, in each writer's order; versions 1..320,
    each returned to exactly one append."""
    migrate(url_for(schema))
    opener = Opener(url_for(schema), face)  # type: ignore[arg-type]
    writers = [f"p{i}" for i in range(8)]
    results = dict(_run_all(_append_after_barrier, [(opener, w, 40) for w in writers]))
    returned = sorted(v for versions in results.values() for v in versions)
    assert returned == list(range(1, 321))
    with memvault.open(url_for(schema)) as store:
        s = store.session("shared")
        check_interleaving(s.history(), writers, 40)
        log = s.log()
        assert [e.version for e in log] == list(range(1, 321))
        assert sorted({e.writer for e in log}) == writers


@pytest.mark.slow
def test_processes_migrating_at_once_apply_each_migration_once(schema: str) -> None:
    """4 processes migrate an empty schema at the same moment: all succeed, one
    applies the migrations, the others find them applied."""
    befores = _run_all(_migrate_after_barrier, [(url_for(schema),)] * 4)
    assert not [b for b in befores if isinstance(b, str)], befores  # errors, as repr
    assert sorted(befores) == [0, latest(), latest(), latest()], befores
    with admin() as conn:
        recorded = conn.execute(
            f'SELECT version FROM "{schema}".migrations ORDER BY version'
        ).fetchall()
    assert recorded == [(m.version,) for m in migrations()]


def test_writers_creating_one_session_at_once_see_each_other(schema: str) -> None:
    """8 connections append with expect_version=0 to a session that does not exist
    yet, all at once: exactly one creates it, the others get ConflictError."""
    outcomes: list[object] = []
    with memvault.open(url_for(schema), min_size=8, max_size=8) as store:
        barrier = threading.Barrier(8)

        def create(i: int) -> None:
            barrier.wait()
            try:
                outcomes.append(
                    store.session("new").append([Message.user(f"m{i}")], expect_version=0)
                )
            except ConflictError as exc:
                outcomes.append(type(exc))

        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes, key=str) == [1] + [ConflictError] * 7
        assert len(store.session("new").history()) == 1


def _append_and_die(url: str) -> None:
    store = memvault.open(url, writer="dies")
    store.session("s").append([Message.user("acknowledged", id="ack")])
    os._exit(0)  # no close, no cleanup: only what was committed survives


def test_acknowledged_append_survives_its_process_dying(schema: str) -> None:
    proc = SPAWN.Process(target=_append_and_die, args=(url_for(schema),))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    with memvault.open(url_for(schema)) as store:
        s = store.session("s")
        assert [m.id for m in s.history()] == ["ack"]
        assert [(e.op, e.writer) for e in s.log()] == [("append", "dies")]
