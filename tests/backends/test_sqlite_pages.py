"""SQLite pages of sessions over settled keys (schema 7): the paging indexes sort on
copies of the keys that appends leave alone, and the rows whose keys moved since
(unsettled, at most SETTLE_AT of them) are read beside them on their live keys. Every
page must still be exactly what the live keys say."""

from __future__ import annotations

import itertools
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import Message, SessionInfo
from memvault.backends.sqlite import txn as sqlite_txn
from memvault.paging import ORDERS

DATA = Path(__file__).parents[1] / "data"


def position(info: SessionInfo, order: str) -> tuple[Any, str]:
    """What ``order`` compares, then the id (a session that never expires last)."""
    never = datetime.max.replace(tzinfo=info.created_at.tzinfo)
    key = {
        "id": 0,
        "version": info.version,
        "length": info.length,
        "updated": info.updated_at,
        "expires": info.expires_at or never,
    }[order]
    return key, info.session_id


def expected(
    infos: list[SessionInfo],
    order: str,
    descending: bool,
    match: str,
    after: SessionInfo | None,
    limit: int,
) -> list[SessionInfo]:
    """The page the model gives: the live sessions (their info() now), filtered,
    sorted, after the previous page's last session as it was listed."""
    chosen = sorted(
        (i for i in infos if match in i.session_id),
        key=lambda i: position(i, order),
        reverse=descending,
    )
    if after is not None:
        start = position(after, order)
        chosen = [
            i
            for i in chosen
            if (position(i, order) < start if descending else position(i, order) > start)
        ]
    return chosen[:limit]


def walk_exactly(
    store: Any,
    ids: Callable[[], list[str]],
    size: int,
    order: str,
    descending: bool,
    match: str = "",
    between: Callable[[], object] = lambda: None,
) -> None:
    """Walk every page of ``size``; each must be the model's page from the same
    cursor, over the sessions ``ids()`` names as they are when it is read.
    ``between()`` runs after each page but the last (writes during the walk)."""
    cursor, last, pages = None, None, 0
    while True:
        page = store.sessions_page(
            size, cursor=cursor, order=order, descending=descending, match=match
        )
        infos = [i for sid in ids() if (i := store.session(sid).info())]
        assert page.sessions == expected(infos, order, descending, match, last, size), (
            order,
            descending,
            match,
            pages,
        )
        if page.cursor is None:
            return
        cursor, last, pages = page.cursor, page.sessions[-1], pages + 1
        between()


def unsettled(path: Path) -> int:
    """How many session rows are unsettled now (to check that the scenario has both
    kinds and crosses the cap; pages never look at this)."""
    with sqlite3.connect(path) as db:
        count: int = db.execute("SELECT count(*) FROM sessions WHERE unsettled").fetchone()[0]
    return count


@pytest.mark.parametrize("settle_at", [8, sqlite_txn.SETTLE_AT])
def test_every_page_is_exact_across_settled_and_unsettled_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settle_at: int
) -> None:
    """Walk every order, both ways, with and without a match, while writes between
    pages unsettle rows, cross the cap (settling them all), fork, delete, pop and
    trim sessions (some summarized, some with a TTL): each page equals the model's
    page from the same cursor. Failing: a page misses the unsettled rows, lists a row
    by a stale settled key, or a settle (or a new row) copies the wrong keys."""
    monkeypatch.setattr(sqlite_txn, "SETTLE_AT", settle_at)
    path = tmp_path / "x.db"
    rng = random.Random(settle_at)
    url = f"sqlite:///{path}"
    with (
        memvault.open(url, durability="normal") as store,
        memvault.open(url, durability="normal", ttl=3600) as ttl_store,
    ):
        names = [f"s{i:03}" for i in range(settle_at + 40)]
        for i, sid in enumerate(names):  # created settled, lengths and versions tied
            (ttl_store if i % 5 == 0 else store).session(sid).append(
                [Message.user(f"{sid}-{k}") for k in range(1 + i % 3)]
            )
        for sid in names[::7]:  # summaries: a length that is not the chain's
            s = store.session(sid)
            s.append([Message.user("a"), Message.user("b")])
            s.summarize(Message.system("summary"), through=s.history()[1].id)
        made, size = len(names), 9 if settle_at < 40 else 40
        counts: list[int] = []

        def write() -> None:
            nonlocal made
            for sid in rng.sample(names, max(2, settle_at // 10)):
                s = (ttl_store if rng.random() < 0.3 else store).session(sid)
                kind = rng.random()
                if kind < 0.7:
                    s.append([Message.user("more")])
                elif kind < 0.8:
                    s.pop()
                elif kind < 0.9:
                    s.trim(keep_last=1)
                else:  # replaced by a new session: a fork (created with its summary)
                    names.append(f"n{made:03}")
                    made += 1
                    s.fork(names[-1])
                    s.delete()
                    names.remove(sid)
            counts.append(unsettled(path))

        for order in ORDERS:
            for descending in (False, True):
                for match in ("", "1"):
                    walk_exactly(store, lambda: names, size, order, descending, match, write)
    # the walks saw both kinds of rows, most pages some unsettled, and settles
    assert max(counts) <= settle_at and sum(c > 0 for c in counts) > len(counts) * 0.8
    assert sum(b < a for a, b in itertools.pairwise(counts)) >= 3


def test_expired_sessions_leave_every_order(tmp_path: Path) -> None:
    """Sessions whose TTL ran out, settled or not, are in no page; one written again
    starts afresh and is listed by its new keys. Failing: a page reads expiry from a
    settled copy, or the fresh row keeps the expired one's keys."""
    url = f"sqlite:///{tmp_path}/x.db"
    with memvault.open(url, ttl=0.6) as short, memvault.open(url) as store:
        for sid in ("a", "b", "c", "d"):
            short.session(sid).append([Message.user(sid)])
        short.session("b").append([Message.user("b2")])  # unsettled, then expires
        for sid in ("e", "f"):
            store.session(sid).append([Message.user(sid)])
        store.session("f").append([Message.user("f2")])  # unsettled, never expires
        time.sleep(0.7)
        short.session("c").append([Message.user("c again")])  # starts afresh
        for order in ORDERS:
            for descending in (False, True):
                page = store.sessions_page(10, order=order, descending=descending)
                infos = [i for sid in "abcdef" if (i := store.session(sid).info())]
                assert page.sessions == expected(infos, order, descending, "", None, 10)
                assert {i.session_id for i in page.sessions} == {"c", "e", "f"}
        assert store.session("c").info().version == 1  # type: ignore[union-attr]


def before(a: SessionInfo, b: SessionInfo, order: str) -> bool:
    """``a`` is listed before ``b`` in ``order``, as far as their infos show: a time
    shows whole microseconds, the store orders by the float it keeps, and two processes
    can stamp two sessions within one microsecond (each stamps before it waits for the
    write lock): there, the floats decide, not the ids."""
    (x, a_id), (y, b_id) = position(a, order), position(b, order)
    return x < y or (x == y and (order in ("updated", "expires") or a_id < b_id))


_WRITER = r"""
import sys
import memvault
url, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
with memvault.open(url, durability="normal") as store:
    for r in range(rounds):
        for k in range(300):
            store.session(f"w{k:03}").append([memvault.Message.user(f"{tag}-{r}-{k}")])
print(rounds * 300)
"""


@pytest.mark.slow
def test_pages_while_two_processes_append(tmp_path: Path) -> None:
    """Two processes append to 300 sessions, more than SETTLE_AT, so their rows are
    unsettled and settled again and again, while this one pages: every page is in
    order with keys after its cursor, the id order lists every session once; when
    they stop, every order pages exactly the model, and no append is lost."""
    url = f"sqlite:///{tmp_path}/x.db"
    assert sqlite_txn.SETTLE_AT < 300
    with memvault.open(url, durability="normal") as store:
        for k in range(300):
            store.session(f"w{k:03}").append([Message.user("first")])
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, url, tag, "3"], stdout=subprocess.PIPE, text=True
            )
            for tag in ("p", "q")
        ]
        walks = 0
        while any(w.poll() is None for w in writers) or walks < 2:
            for order in ORDERS:
                cursor, listed = None, []
                while True:
                    page = store.sessions_page(25, cursor=cursor, order=order)
                    shown = listed[-1:] + page.sessions
                    assert all(before(a, b, order) for a, b in itertools.pairwise(shown)), order
                    listed += page.sessions
                    if page.cursor is None:
                        break
                    cursor = page.cursor
                ids = [i.session_id for i in listed]
                if order == "id":  # ids never move: every session once
                    assert ids == sorted(store.sessions())
            walks += 1
        assert sum(int(w.communicate(timeout=120)[0]) for w in writers) == 2 * 3 * 300
        written = [store.session(f"w{k:03}").info() for k in range(300)]
        assert sum(i.length for i in written if i) == 300 + 2 * 3 * 300
        assert unsettled(tmp_path / "x.db") <= sqlite_txn.SETTLE_AT
        for order in ORDERS:
            for descending in (False, True):
                walk_exactly(store, store.sessions, 50, order, descending)


def test_a_schema_6_file_is_upgraded_and_pages_by_its_keys(tmp_path: Path) -> None:
    """A store written by schema 6 (tests/data/baseline-schema6.sqlite: the baseline
    run, searched, one more turn) is upgraded in place, its rows settled on the keys
    they had: every order pages it exactly, before and after more writes. Failing:
    the upgrade leaves the settled keys at their defaults (the pages come out in the
    wrong order) or flags the rows unsettled."""
    path = tmp_path / "old.db"
    shutil.copy(DATA / "baseline-schema6.sqlite", path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 6
    with memvault.open(f"sqlite:///{path}") as store:
        assert unsettled(path) == 0
        assert len(store.sessions()) == 3
        for _ in range(2):
            for order in ORDERS:
                for descending in (False, True):
                    walk_exactly(store, store.sessions, 1, order, descending)
            store.session("user-42-retry").append([Message.user(f"more {k}") for k in range(4)])
        assert unsettled(path) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 7
