"""Reading any logged version: ``history(at_version=N)``."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import InvalidArgumentError, VersionNotFoundError
from memvault.testing.contract.base import ContractBase, texts, users


class VersionsContract(ContractBase):
    def test_every_version_reads_back_as_it_was(self, store: Any) -> None:
        """After append, pop, trim, clear, snapshot, rollback and more appends, each
        version's history is what ``history()`` returned right after it.
        Failing: a backend's chain read ignores ``head`` or ``base``, or the facade
        takes the wrong event's pointers."""
        s = store.session("s")
        seen: dict[int, list[Any]] = {0: []}

        def record() -> None:
            seen[s.info().version] = texts(s.history())

        s.append(users(4))
        record()
        s.snapshot("four")
        s.pop()
        record()
        s.trim(keep_last=2)
        record()
        s.append(users(2, "x"))
        record()
        s.clear()
        record()
        s.rollback("four")
        record()
        s.append(users(1, "y"))
        record()
        assert sorted(seen) == list(range(8))
        for version, history in seen.items():
            assert texts(s.history(at_version=version)) == history, version
            assert texts(s.history(last=2, at_version=version)) == history[-2:], version
            assert texts(s.history(last=0, at_version=version)) == [], version

    def test_fork_starts_at_version_one(self, store: Any) -> None:
        """A fork's first version is the copied history. Failing: the fork's event
        points at the source's nodes, or its log is missing."""
        s = store.session("s")
        s.append(users(3))
        fork = s.fork("f")
        fork.append(users(1, "x"))
        assert texts(fork.history(at_version=1)) == ["m0", "m1", "m2"]
        assert texts(fork.history(at_version=2)) == ["m0", "m1", "m2", "x0"]

    def test_a_version_not_reached_raises(self, store: Any) -> None:
        """A version above the current one raises VersionNotFoundError naming the
        current version; reading writes nothing. Failing: an empty list instead."""
        s = store.session("s")
        assert s.history(at_version=0) == []
        with pytest.raises(VersionNotFoundError, match="at version 0"):
            s.history(at_version=1)
        assert s.info() is None
        s.append(users(1))
        with pytest.raises(VersionNotFoundError, match="at version 1; version 2"):
            s.history(at_version=2)

    def test_compact_keeping_every_event_keeps_every_version(self, store: Any) -> None:
        """compact with no ``keep_events`` keeps what every logged version reads, the
        messages only an event's state before it reaches too (a pop's popped message,
        written over since), and so does the oldest event it keeps. Failing: Redis's
        compact kept each event's state after it in place of the state before it (a
        mutant survived the suite).
        """
        s = store.session("s")
        s.append(users(3))
        s.pop()
        s.append(users(1, "n"))
        before = [texts(s.history(at_version=v)) for v in range(4)]
        assert before[1] == ["m0", "m1", "m2"]
        assert store.compact().nodes == 0
        assert [texts(s.history(at_version=v)) for v in range(4)] == before
        assert store.compact(keep_events=2).nodes == 0  # the pop's event: before it, m2
        assert store.compact(keep_events=1).nodes == 1

    def test_a_compacted_version_raises(self, store: Any) -> None:
        """compact(keep_events=N) drops the older versions: reading one raises
        VersionNotFoundError saying so; the kept ones still read back.
        Failing: a dropped version reads as an empty or partial list."""
        s = store.session("s")
        for i in range(3):
            s.append(users(1, f"v{i}"))
        s.pop()
        store.compact(keep_events=2)
        with pytest.raises(VersionNotFoundError, match="keep_events"):
            s.history(at_version=1)
        assert texts(s.history(at_version=3)) == ["v00", "v10", "v20"]
        assert texts(s.history(at_version=4)) == ["v00", "v10"]

    @pytest.mark.parametrize("bad", [-1, "1", 1.0, True, 2**63])
    def test_bad_at_version_is_rejected(self, store: Any, bad: Any) -> None:
        """A negative, too large or non-int version raises InvalidArgumentError before
        any I/O. Failing: the facade passed it on to the backend unchecked."""
        with pytest.raises(InvalidArgumentError, match="at_version"):
            store.session("s").history(at_version=bad)
