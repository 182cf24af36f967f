"""``memvault reindex``: backfills vectors, resumable after SIGKILL, --replace."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from memvault import ConfigurationError, Message
from memvault.testing import ConceptEmbedder

ROOT = Path(__file__).resolve().parents[2]


def run(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memvault", "reindex", "--url", url, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stored(path: Path) -> int:
    with sqlite3.connect(path) as db:
        try:
            count: int = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        except sqlite3.OperationalError:  # no table yet
            return 0
        return count


def test_reindex_survives_sigkill_and_finishes_without_duplicates(tmp_path: Path) -> None:
    """Killed mid-run, the next run embeds only what is missing and ends with one
    vector per distinct text; search then needs no query-time embedding.
    Failing: batches not stored as they go, or everything embedded again."""
    path = tmp_path / "r.db"
    url = f"sqlite:///{path}"
    with memvault.open(url) as store:
        for sid in ("a", "b"):
            store.session(sid).append([Message.user(f"{sid} message {i}") for i in range(300)])
        store.session("a").append([Message.user("a message 0 again"), Message.user("a cat")])
    total = 602
    first = run(url, "--embedder", "tests.support.embedders:SlowConcepts", "--batch", "40")
    deadline = time.monotonic() + 60
    while stored(path) < 80 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    partial = stored(path)
    assert 80 <= partial < total
    second = run(url, "--embedder", "tests.support.embedders:SlowConcepts", "--batch", "400")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"{total - partial} texts embedded, {partial} already stored" in out
    assert stored(path) == total
    embedder = ConceptEmbedder()
    with memvault.open(url, embedder=embedder) as store:
        assert store.session("a").search("kitten", k=1)[0].message.content == "a cat"
        assert embedder.calls == 1  # the query alone: every message had its vector


def test_replace_moves_a_store_to_another_embedder(tmp_path: Path) -> None:
    """--replace deletes the old vectors and records the new embedder; without it,
    the other embedder is refused. Failing: vectors of two models mixed."""
    url = f"sqlite:///{tmp_path}/r.db"
    with memvault.open(url, embedder=ConceptEmbedder(name="old")) as store:
        store.session("s").append([Message.user("a cat"), Message.user("a car")])
    refused = run(url, "--embedder", "tests.support.embedders:SlowConcepts")
    _, err = refused.communicate(timeout=60)
    assert refused.returncode != 0 and "--replace" in err
    done = run(url, "--embedder", "tests.support.embedders:SlowConcepts", "--replace")
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert "2 texts embedded, 0 already stored" in out
    with pytest.raises(ConfigurationError, match="reindex"):
        memvault.open(url, embedder=ConceptEmbedder(name="old"))
    with memvault.open(url, embedder=ConceptEmbedder()) as store:
        assert store.session("s").search("kitten", k=1)[0].message.content == "a cat"


def test_reindex_names_a_bad_embedder(tmp_path: Path) -> None:
    bad = run(f"sqlite:///{tmp_path}/r.db", "--embedder", "no.such.module:Thing")
    _, err = bad.communicate(timeout=60)
    assert bad.returncode != 0 and "cannot load embedder 'no.such.module:Thing'" in err


def test_cli_search_with_an_embedder_ranks_by_meaning(tmp_path: Path) -> None:
    """`memvault search --embedder` fuses the embedder's ranking (read-only: the store
    gets no vector). Failing: the option ignored (no word of the query matches)."""
    url = f"sqlite:///{tmp_path}/s.db"
    with memvault.open(url) as store:
        store.session("s").append([Message.user("a car"), Message.user("a kitten")])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memvault",
            "search",
            "s",
            "feline",
            "--url",
            url,
            "--embedder",
            "tests.support.embedders:SlowConcepts",
            "--json",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert '"content":"a kitten"' in out.stdout and "a car" not in out.stdout
    assert stored(tmp_path / "s.db") == 0
