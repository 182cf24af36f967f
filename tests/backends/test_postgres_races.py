"""Two writers of one PostgreSQL session at once, interleaved deterministically.

A third connection holds a lock that one writer's transaction reaches after it
locked the session's row, so that transaction stays open; the other writer starts
then, and the lock is let go only once both wait for something (or the second is
done). What each returned and what the session holds then show whether the second
writer waited for the first's row lock (``SELECT ... FOR UPDATE``) or worked from
the row as it was before the first committed. These run in the same process as
``tools/mutate_scripts.py``'s mutants, unlike the multi-process tests.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memvault
from memvault import Message
from memvault.errors import CorruptRecordError
from tests.support.postgres import admin, new_schema, url_for


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    return new_schema(request)


@pytest.fixture
def stores(schema: str) -> Iterator[list[Any]]:
    """Three handles on one store: the test's own and one per racing writer."""
    opened = [memvault.open(url_for(schema)) for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


def _waiting(schema: str) -> int:
    """How many of the store's calls wait for a lock now."""
    with admin() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type ="
            " 'Lock' AND position(%s in query) > 0",
            (f'"{schema}".',),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.01)


class Racer(threading.Thread):
    """Runs ``call`` once, keeping what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call, self.result, self.error = call, None, None

    def run(self) -> None:
        try:
            self.result = self.call()
        except Exception as exc:  # the test reads it
            self.error = exc

    def outcome(self) -> Any:
        self.join(30)
        assert not self.is_alive(), "a racing call never returned"
        if self.error is not None:
            raise self.error
        return self.result


@contextlib.contextmanager
def held(schema: str, statement: str) -> Iterator[None]:
    """``statement`` (a lock) held by a transaction of another connection until the
    block ends."""
    with admin() as conn, conn.transaction():
        conn.execute(statement.replace("@schema@", f'"{schema}"'))
        yield


def race(
    schema: str, lock: str, first: Callable[[], Any], second: Callable[[], Any]
) -> tuple[Any, Any]:
    """``first`` held inside its transaction by ``lock``, then ``second`` started;
    ``lock`` is let go once ``second`` waits too or is done. Both outcomes."""
    with held(schema, lock):
        one = Racer(first)
        one.start()
        _until(lambda: _waiting(schema) == 1, "the first call waits for the lock")
        two = Racer(second)
        two.start()
        _until(
            lambda: not two.is_alive() or _waiting(schema) == 2,
            "the second call waits too, or is done",
        )
    return one.outcome(), two.outcome()


EVENTS = "LOCK TABLE @schema@.events IN EXCLUSIVE MODE"  # every write's last step waits


def test_two_pops_at_once_pop_two_messages(schema: str, stores: list[Any]) -> None:
    """Two pops of one session at once each pop a message of their own: the second
    waits for the first's lock on the session and pops the message below. Failing:
    _lock read the session's row without FOR UPDATE, so the second pop hid the
    message the first was hiding and returned it again (a mutant survived).
    """
    mine, a, b = stores
    mine.session("s").append([Message.user(f"m{i}") for i in range(3)])
    popped = race(schema, EVENTS, a.session("s").pop, b.session("s").pop)
    assert [m.content for m in popped] == ["m2", "m1"]
    assert [m.content for m in mine.session("s").history()] == ["m0"]
    assert [e.op for e in mine.session("s").log()] == ["append", "pop", "pop"]


def test_two_appends_at_once_both_land(schema: str, stores: list[Any]) -> None:
    """Two appends to one session at once both land, one after the other: the
    second waits for the first's lock on the session and chains its message onto
    the first's. Failing: append read the session's row without FOR UPDATE, so the
    second numbered its node as the first had and failed on the first's commit (a
    mutant survived the suite).
    """
    mine, a, b = stores
    mine.session("s").append([Message.user("m0")])
    versions = race(
        schema,
        EVENTS,
        lambda: a.session("s").append([Message.user("x")]),
        lambda: b.session("s").append([Message.user("y")]),
    )
    assert versions == (2, 3)
    assert [m.content for m in mine.session("s").history()] == ["m0", "x", "y"]


def test_compact_keeps_what_is_appended_while_it_runs(schema: str, stores: list[Any]) -> None:
    """An append to a session that compact is about to take, committed while compact
    waits on an earlier session, is kept: compact takes each session's row as it
    is, locked, not as it was when compact began. Failing: compact_step read the
    sessions without FOR UPDATE, so it dropped the new event (keep_events=0) and
    deleted the new message as unreachable from the old head (a mutant survived).
    """
    mine, a, b = stores
    mine.session("a").append([Message.user("a0")])  # compact's first session
    mine.session("s").append([Message.user("m0"), Message.user("m1")])
    lock = (
        "SELECT 1 FROM @schema@.events WHERE sid = (SELECT sid FROM"
        " @schema@.sessions WHERE name = 'a'::bytea) FOR UPDATE"
    )
    race(
        schema,
        lock,
        lambda: a.compact(keep_events=0),
        lambda: b.session("s").append([Message.user("new")]),
    )
    try:
        history = [m.content for m in mine.session("s").history()]
    except CorruptRecordError as exc:  # the new head deleted
        pytest.fail(f"compact deleted the message appended while it ran: {exc}")
    assert history == ["m0", "m1", "new"]
