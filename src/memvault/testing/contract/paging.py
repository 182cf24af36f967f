"""Listing sessions a page at a time: every session once, in order, whatever the
writes during the walk; expired sessions left out; bad arguments refused."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from memvault.errors import InvalidArgumentError
from memvault.messages import Message
from memvault.model import SessionInfo
from memvault.paging import ORDERS
from memvault.testing.contract.base import ContractBase, users

# Ids that a LIKE pattern, a glob, a hash tag or a key separator would misread.
TTL = 2.0
ODD_IDS = ["100%", "a_b", "*", "{tag}", "x:y", "ünï cødé 🚀", "name with spaces", "Z"]


def walk(
    store: Any, limit: int, between: Callable[[int], None] | None = None, **options: Any
) -> list[SessionInfo]:
    """Every page of ``store.sessions_page(limit, **options)``, in order; ``between(k)``
    runs after page k (writes during the walk)."""
    out: list[SessionInfo] = []
    cursor = None
    for k in range(10_000):
        page = store.sessions_page(limit, cursor=cursor, **options)
        assert len(page.sessions) <= limit
        out += page.sessions
        if page.cursor is None:
            return out
        assert page.sessions, "a page with a cursor after it holds sessions"
        if between:
            between(k)
        cursor = page.cursor
    raise AssertionError("the walk never ended")


def sort_key(info: SessionInfo, order: str) -> Any:
    """What the order compares (then the id): a session that never expires sorts
    after every date."""
    if order == "expires":
        return (info.expires_at is None, info.expires_at.timestamp() if info.expires_at else 0)
    return {
        "id": 0,
        "version": info.version,
        "length": info.length,
        "updated": info.updated_at.timestamp(),
    }[order]


def check_order(listed: list[SessionInfo], order: str, descending: bool) -> None:
    """In order: by key, ties by id (times compare as SessionInfo shows them, to the
    microsecond, so their ties are not checked by id)."""
    keys = [(sort_key(i, order), i.session_id) for i in listed]
    if order in ("updated", "expires"):
        keys = [(k, "") for k, _ in keys]
    assert keys == sorted(keys, reverse=descending), f"not in {order} order"


class PagingContract(ContractBase):
    def fill(self, store: Any) -> dict[str, SessionInfo]:
        """Sessions with distinct and tied versions, lengths and times (a trim, a
        pop and a summary among them); returns each one's info."""
        for i, sid in enumerate([f"s{i:02}" for i in range(14)] + ODD_IDS):
            s = store.session(sid)
            s.append(users(1 + i % 4, sid))
            if i % 3 == 0:
                s.append(users(2, f"{sid}-more"))
            if i % 5 == 1:
                s.trim(keep_last=1)
            if i % 7 == 2:
                s.pop()
            if i % 6 == 4 and len(history := s.history()) > 1:
                s.summarize(Message.assistant("summary"), through=history[0].id)
        return {sid: store.session(sid).info() for sid in store.sessions()}

    def test_pages_list_every_session_once_in_each_order(self, store: Any) -> None:
        """Walking pages of 4 in every order, both ways, lists each live session
        once, with its info, in order. Failing: the cursor skips or repeats at page
        boundaries or ties, an order's key is computed differently from info(), or
        ids compare other than by code point."""
        infos = self.fill(store)
        for order in ORDERS:
            for descending in (False, True):
                listed = walk(store, 4, order=order, descending=descending)
                assert sorted(i.session_id for i in listed) == sorted(infos), (order, descending)
                assert {i.session_id: i for i in listed} == infos
                check_order(listed, order, descending)
        assert [i.session_id for i in walk(store, 5)] == sorted(infos)

    def test_page_edges(self, store: Any) -> None:
        """An empty store gives one empty page; a last page that is full has no
        cursor after it (no empty page to fetch); limit 1 works.
        Failing: the backend fetches one row too few or too many per page."""
        page = store.sessions_page()
        assert page.sessions == [] and page.cursor is None
        for sid in "abcd":
            store.session(sid).append(users(1))
        page = store.sessions_page(4)
        assert [i.session_id for i in page.sessions] == list("abcd") and page.cursor is None
        assert [i.session_id for i in walk(store, 1, descending=True)] == list("dcba")

    def test_pages_stay_stable_while_sessions_come_and_go(self, store: Any) -> None:
        """Sessions created and deleted between pages (before, among and after the
        cursor) never make the walk skip or repeat a session that exists throughout.
        Failing: the cursor is an offset, or depends on what was deleted."""
        keep = [f"k{i:03}" for i in range(16)]
        for sid in keep:
            store.session(sid).append(users(1 + len(sid) % 3))
        for order in ORDERS:
            for sid in keep[::4]:
                store.session(f"{sid}-tmp").append(users(2))

            def churn(k: int, order: str = order) -> None:
                for sid in keep[k::8]:
                    store.session(f"{sid}-tmp").delete()
                    store.session(f"{sid}-new-{order}-{k}").append(users(1 + k % 4))
                store.session(f"a-before-{order}-{k}").append(users(3))
                store.session(f"zz-after-{order}-{k}").append(users(1))

            listed = [i.session_id for i in walk(store, 4, churn, order=order)]
            kept = [sid for sid in listed if sid in keep]
            assert sorted(kept) == keep, f"{order}: skipped or repeated"
            assert len(listed) == len(set(listed)), f"{order}: a session listed twice"

    def test_pages_go_on_after_their_last_session_moved_or_went(self, store: Any) -> None:
        """Between pages the page's last session is deleted, or rewritten (its key
        changes), among sessions tied on the same key (version, length, expiry): the
        next page starts right after where it was. Failing: the cursor is resolved
        through the last session itself (its current key or position), so the walk
        restarts, skips or repeats the sessions after it."""
        ids = [f"t{i:02}" for i in range(24)]
        for order in ORDERS:
            for descending in (False, True):
                for sid in store.sessions():
                    store.session(sid).delete()
                for sid in ids:
                    store.session(sid).append(users(1, sid))
                touched: list[str] = []
                listed: list[str] = []
                cursor = None
                while True:
                    page = store.sessions_page(5, cursor=cursor, order=order, descending=descending)
                    listed += [i.session_id for i in page.sessions]
                    if page.cursor is None:
                        break
                    cursor, last = page.cursor, page.sessions[-1].session_id
                    if len(touched) % 2:
                        store.session(last).append(users(1, f"{last}-more"))
                    else:
                        store.session(last).delete()
                    touched.append(last)
                kept = [sid for sid in ids if sid not in touched]
                assert [sid for sid in listed if sid in kept] == sorted(kept, reverse=descending), (
                    order,
                    descending,
                )

    def test_match_filters_ids(self, store: Any) -> None:
        """``match`` keeps the ids containing the text, taken literally (no pattern
        characters); pages of a filter walk like the others.
        Failing: match is passed to LIKE/GLOB/MATCH unescaped, or filters after paging."""
        for sid in [*ODD_IDS, "100", "ab", "axb", "c"]:
            store.session(sid).append(users(1))
        assert [i.session_id for i in walk(store, 2, match="%")] == ["100%"]
        assert [i.session_id for i in walk(store, 2, match="_")] == ["a_b"]
        assert [i.session_id for i in walk(store, 2, match="*")] == ["*"]
        assert [i.session_id for i in walk(store, 2, match="{")] == ["{tag}"]
        assert [i.session_id for i in walk(store, 1, match="🚀")] == ["ünï cødé 🚀"]
        assert [i.session_id for i in walk(store, 1, match="b", descending=True)] == [
            "axb",
            "ab",
            "a_b",
        ]
        assert walk(store, 3, match="nowhere") == []

    def test_pages_leave_out_expired_sessions(self, opener: Any) -> None:
        """Sessions past their TTL are in no page, in any order, before any compact.
        Failing: the listing reads rows or index entries without checking expiry."""
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            for sid in ("gone-a", "live-b", "gone-c"):
                store.session(sid).append(users(1))
            time.sleep(TTL + 0.3)
            for sid in ("live-a", "live-b", "new"):
                store.session(sid).append(users(2))
            for order in ORDERS:
                listed = [i.session_id for i in walk(store, 1, order=order)]
                assert sorted(listed) == ["live-a", "live-b", "new"], order
        finally:
            store.close()

    def test_bad_page_arguments_are_refused(self, store: Any) -> None:
        """A bad limit, order, direction, match or cursor raises InvalidArgumentError,
        and so does a cursor passed with another order or match than its own.
        Failing: an argument check was bypassed and reached the backend."""
        for sid in "abc":
            store.session(sid).append(users(1))
        cursor = store.sessions_page(1).cursor
        assert cursor is not None
        bad: list[dict[str, Any]] = [
            {"limit": 0},
            {"limit": -1},
            {"limit": True},
            {"limit": "5"},
            {"limit": 10**9},
            {"order": "name"},
            {"order": None},
            {"descending": "yes"},
            {"match": 5},
            {"cursor": "not a cursor"},
            {"cursor": ""},
            {"cursor": 12},
            {"cursor": cursor[:-3]},
            {"cursor": cursor, "order": "version"},
            {"cursor": cursor, "descending": True},
            {"cursor": cursor, "match": "a"},
        ]
        for kwargs in bad:
            with pytest.raises(InvalidArgumentError):
                store.sessions_page(**kwargs)
        assert [i.session_id for i in store.sessions_page(5, cursor=cursor).sessions] == ["b", "c"]
