"""Sliding TTL: every write extends it, reads never do, expiry is all or nothing."""

from __future__ import annotations

import time
from typing import Any

from memvault.testing.contract.base import ContractBase, texts, users

TTL = 1.5


class TtlContract(ContractBase):
    def test_session_expires_whole_and_restarts_afresh(self, opener: Any) -> None:
        """Reads do not extend the TTL; after it, history, info, snapshots and
        sessions() are empty; a write starts the session afresh (version 1)."""
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            s = store.session("s")
            s.append(users(2))
            s.snapshot("cp")
            expires = s.info().expires_at
            assert expires is not None and 0 < expires.timestamp() - time.time() <= TTL
            time.sleep(TTL * 0.6)
            assert len(s.history()) == 2  # a read: must not extend
            time.sleep(TTL * 0.6)
            assert s.history() == [] and s.info() is None and s.snapshots() == []
            assert store.sessions() == []
            assert s.append(users(1, "new")) == 1
            assert texts(s.history()) == ["new0"] and s.snapshots() == []
        finally:
            store.close()

    def test_every_write_slides_the_ttl(self, opener: Any) -> None:
        """A write before expiry extends it by the full TTL."""
        self.require("ttl")
        store = opener(ttl=TTL)
        try:
            s = store.session("s")
            s.append(users(3))
            for write in (s.pop, lambda: s.snapshot("x"), lambda: s.trim(keep_last=1)):
                time.sleep(TTL * 0.6)
                write()
            time.sleep(TTL * 0.6)
            assert texts(s.history()) == ["m1"]
        finally:
            store.close()

    def test_no_ttl_means_no_expiry(self, store: Any) -> None:
        """Without ttl= a session has no expiry."""
        s = store.session("s")
        s.append(users(1))
        assert s.info().expires_at is None
