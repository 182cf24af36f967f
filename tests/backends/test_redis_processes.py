"""8 processes appending to one session on the shared Redis lose nothing."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

import memvault
from memvault.checks.opener import Opener
from memvault.testing import workers
from memvault.testing.contract.concurrency import check_interleaving
from tests.support.redis import flushed

WRITERS = [f"p{i}" for i in range(8)]
TURNS = 100


@pytest.mark.slow
@pytest.mark.parametrize("face", ["sync", "async"])
def test_eight_processes_appending_to_one_session(face: str) -> None:
    """8 processes x 100 two-message turns, one append each, on one session: every
    turn stored once, whole, in each writer's order; versions 1..800 each logged
    once. Failing: appends are not serialized by the script (read-modify-write)."""
    opener = Opener(flushed(), face)  # type: ignore[arg-type]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(WRITERS), mp_context=ctx) as pool:
        futures = [pool.submit(workers.append_turns, opener, "shared", w, TURNS) for w in WRITERS]
        versions = [f.result() for f in futures]
    total = len(WRITERS) * TURNS
    assert max(versions) == total
    with memvault.open(opener.url) as store:
        s = store.session("shared")
        check_interleaving(s.history(), WRITERS, TURNS)
        log = s.log()
        assert [e.version for e in log] == list(range(1, total + 1))
        assert sorted({e.writer for e in log}) == WRITERS
