"""Opener: a picklable recipe for a store reached by URL or by a backend factory."""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

from memvault import Message
from memvault.backends.sqlite.backend import SqliteBackend
from memvault.backends.threaded import ThreadedAsyncBackend
from memvault.testing import Opener


def async_sqlite(path: str) -> ThreadedAsyncBackend:
    return ThreadedAsyncBackend(SqliteBackend(path))


def test_factory_opener_pickles_and_shares_one_store(tmp_path: Path) -> None:
    path = str(tmp_path / "f.db")
    sync = Opener("mine:", factory=functools.partial(SqliteBackend, path), options={"writer": "w"})
    sync = pickle.loads(pickle.dumps(sync))
    with sync() as store:
        store.session("s").append([Message.user("from sync")])
        assert repr(store) == "Store('mine:')"
    for opener in (
        Opener("mine:", "async", factory=functools.partial(SqliteBackend, path)),
        Opener("mine:", "async", async_factory=functools.partial(async_sqlite, path)),
    ):
        store = opener(writer="a")
        try:
            s = store.session("s")
            assert [m.content for m in s.history()] == ["from sync"]
            assert s.log()[0].writer == "w"
        finally:
            store.close()
