"""JSONL export/import (memvault.cli.transfer) and the seeded_store fixture."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import ConflictError, InvalidMessageError, Message
from memvault.cli.transfer import export_session, export_sessions, import_sessions
from tests.data.make_baseline import run as baseline_flow

DATA = Path(__file__).parents[1] / "data"


def contents(store: Any) -> dict[str, Any]:
    """Every session's history and every user snapshot's messages (read by rolling
    back a fork, so the store itself is not changed)."""
    out: dict[str, Any] = {}
    for sid in store.sessions():
        s = store.session(sid)
        snaps = {}
        for snap in s.snapshots():
            if not snap.auto:
                probe = s.fork(f"probe-{sid}-{snap.name}", at=snap.name)
                snaps[snap.name] = probe.history()
                probe.delete()
        out[sid] = (s.history(), snaps)
    return out


def test_export_import_round_trip_on_every_backend(any_store_url: str) -> None:
    """Histories and user snapshots arrive message for message (ids, timestamps, NUL,
    tool calls); exporting the import gives the same file; the source is untouched."""
    with memvault.open("memory://") as source, memvault.open(any_store_url) as target:
        baseline_flow(source)
        before = [source.session(sid).log() for sid in source.sessions()]
        lines = list(export_sessions(source))
        assert [source.session(sid).log() for sid in source.sessions()] == before
        assert import_sessions(target, lines) == source.sessions()
        assert contents(target) == contents(source)
        assert list(export_sessions(target)) == lines
        target.session("user-42").rollback("before-booking")
        assert [m.id for m in target.session("user-42").history()] == ["sys", "u1", "a1", "t1"]


def test_summaries_travel_with_their_originals(any_store_url: str) -> None:
    """A summarized session exports its originals, its summaries and where each was
    taken; the import reads the same in both views, and exports the same file."""
    with memvault.open("memory://") as source, memvault.open(any_store_url) as target:
        s = source.session("sum")
        msgs = [Message.user(f"m{i}") for i in range(6)]
        s.append(msgs)
        s.summarize(Message.system("S1"), through=msgs[1].id)
        s.summarize(Message.system("S2"), through=msgs[3].id)
        lines = list(export_session(source, "sum"))
        import_sessions(target, lines)
        t = target.session("sum")
        assert t.history() == s.history() and t.history(full=True) == s.history(full=True)
        assert t.info().summarized == 4
        assert list(export_session(target, "sum")) == lines


def test_committed_export_matches_the_committed_sqlite_baseline(tmp_path: Path) -> None:
    with (
        memvault.open(f"sqlite:///{tmp_path}/x.db") as imported,
        memvault.open("memory://") as replayed,
    ):
        import_sessions(imported, (DATA / "baseline.jsonl").read_text("utf-8").splitlines())
        baseline_flow(replayed)
        assert contents(imported) == contents(replayed)


def test_import_refuses_an_existing_session_and_writes_nothing() -> None:
    with memvault.open("memory://") as source, memvault.open("memory://") as target:
        baseline_flow(source)
        target.session("user-42-retry").append([Message.user("mine")])
        with pytest.raises(ConflictError):
            import_sessions(target, export_sessions(source))
        assert target.sessions() == ["user-42-retry"]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ('{"type": "message", "message": {}}', "line 1: a session line must come first"),
        ('{"type": "session", "id": "s", "format": 9}', "line 1: unsupported format 9"),
        (
            '{"type": "session", "id": "s", "format": 1}\n{"type": "history", "messages": ["x"]}',
            "line 2: message 'x' is not defined",
        ),
        ('{"type": "session", "id": "s", "format": 1}\nnot json', "line 2"),
        (
            '{"type": "session", "id": "s", "format": 1}\n'
            '{"type": "message", "message": {"role": "wizard", "content": "x"}}',
            "line 2",
        ),
    ],
)
def test_malformed_import_names_the_line(line: str, error: str) -> None:
    with memvault.open("memory://") as store:
        with pytest.raises(InvalidMessageError, match=error):
            import_sessions(store, line.splitlines())
        assert store.sessions() == []


def test_export_of_a_missing_session_is_empty() -> None:
    with memvault.open("memory://") as store:
        assert list(export_session(store, "nobody")) == []


@pytest.mark.memvault_seed("../data/baseline.jsonl")
def test_seeded_from_jsonl_starts_with_history_and_snapshots(seeded_store: Any) -> None:
    s = seeded_store.session("user-42")
    assert [m.id for m in s.history()] == ["sys", "u1", "a1", "t1", "a3"]
    assert [x.name for x in s.snapshots()] == ["before-booking", "asked"]
    s.rollback("before-booking")
    s.append([Message.user("changed in this test only")])


@pytest.mark.memvault_seed("../data/baseline.jsonl")
def test_each_test_gets_its_own_copy(seeded_store: Any) -> None:
    assert len(seeded_store.session("user-42").history()) == 5  # the test above changed its own


@pytest.mark.memvault_seed("../data/baseline.sqlite")
def test_seeded_from_sqlite_keeps_the_baseline_file_unchanged(seeded_store: Any) -> None:
    digest = hashlib.sha256((DATA / "baseline.sqlite").read_bytes()).hexdigest()
    s = seeded_store.session("user-42")
    assert [e.op for e in s.log()] == [
        "append",
        "append",
        "snapshot",
        "append",
        "rollback",
        "append",
        "snapshot",
    ]
    assert [m.id for m in s.history()] == ["sys", "u1", "a1", "t1", "a3"]
    s.rollback("auto:pre-rollback@v3")
    assert [m.id for m in s.history()][-2:] == ["a2", "t2"]
    seeded_store.session("user-42-retry").delete()
    assert hashlib.sha256((DATA / "baseline.sqlite").read_bytes()).hexdigest() == digest
    assert not (DATA / "baseline.sqlite-wal").exists()


@pytest.mark.memvault_seed("../data/baseline.sqlite")
def test_sqlite_and_jsonl_seeds_hold_the_same_conversations(
    seeded_store: Any, tmp_path: Path
) -> None:
    with memvault.open(f"sqlite:///{tmp_path}/j.db") as from_jsonl:
        import_sessions(from_jsonl, (DATA / "baseline.jsonl").open(encoding="utf-8"))
        assert contents(from_jsonl) == contents(seeded_store)


def test_seeded_store_without_a_baseline_says_how_to_give_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(seeded_store):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*memvault_seed*"])
