"""``memvault torture``: short real runs, and proof that the audit catches violations.

A torture run is only worth its zero if the same audit reports broken stores. Two
ways to show it: real runs against deliberately broken backends
(tests/support/broken.py), and one real run's history file altered to contain one
kind of violation at a time.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memvault
from memvault import ConfigurationError
from memvault.checks.opener import Opener
from memvault.torture import TortureSettings, audit_history, audit_records, run_torture
from tests.support.broken import (
    LosingBackend,
    RefusingBackend,
    SnapshotWipingBackend,
    TearingBackend,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

Records = list[dict[str, Any]]


def torture_cli(*args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memvault",
            "torture",
            "--json",
            str(report),
            "--history",
            str(tmp_path / "history"),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    return done, json.loads(report.read_text()) if report.exists() else None


def test_cli_run_with_kills_on_sqlite_is_clean(tmp_path: Path) -> None:
    """Kills and faults on a real SQLite file: exit 0, every operation kind exercised,
    every finding zero, the table and the JSON report agree."""
    done, report = torture_cli(
        "--url",
        f"sqlite:///{tmp_path}/t.db",
        "--seconds",
        "5",
        "--kill-rate",
        "2",
        "--fault-rate",
        "0.05",
        "--writers",
        "3",
        "--readers",
        "1",
        tmp_path=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["ok"] and report["kills"] > 0 and report["faults"] > 0
    assert all(op["ok"] > 0 for op in report["operations"].values()), report["operations"]
    assert all(f["count"] == 0 for f in report["findings"].values())
    assert "every acknowledged change is accounted for" in done.stdout
    assert "(unread): messages hidden by a pop whose outcome was unknown" in done.stdout
    for column in ("lost", "duplicated", "reordered", "torn", "corrupted", "p50 ms", "p99 ms"):
        assert column in done.stdout
    assert Path(report["history_file"]).exists()
    with memvault.open(f"sqlite:///{tmp_path}/t.db") as store:
        assert store.sessions() == []  # a clean run removes its sessions (unless --keep)


def test_async_face_and_durability_option(tmp_path: Path) -> None:
    """The async face, with a backend option, through the Python API."""
    opener = Opener(f"sqlite:///{tmp_path}/t.db", "async", {"durability": "normal"})
    path = run_torture(
        opener, TortureSettings(writers=2, readers=1, seconds=3, kill_rate=1, history=str(tmp_path))
    )
    report = audit_history(path)
    assert report.ok, report.summary()
    assert report.operations["append"].ok > 0


@pytest.mark.parametrize(
    "backend,finding",
    [
        (LosingBackend, "lost"),
        (SnapshotWipingBackend, "snapshot_drift"),
        (TearingBackend, "torn"),
    ],
)
def test_broken_backends_are_caught(backend: type, finding: str, tmp_path: Path) -> None:
    """A backend that loses acknowledged appends, wipes snapshots on rollback, or
    splits a batch: the run reports it and exits 1."""
    done, report = torture_cli(
        "--url",
        "broken",
        "--factory",
        f"tests.support.broken:{backend.__name__}",
        "-o",
        f"path={tmp_path}/t.db",
        "--seconds",
        "3",
        "--kill-rate",
        "0",
        "--writers",
        "2",
        "--readers",
        "1",
        tmp_path=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert not report["ok"] and report["findings"][finding]["count"] > 0, report["findings"]
    assert "FAILED" in done.stdout
    with memvault.open(f"sqlite:///{tmp_path}/t.db") as store:
        assert store.sessions() == report["run"]["sessions"]  # kept for inspection


def test_a_run_that_acknowledged_nothing_is_not_ok(tmp_path: Path) -> None:
    """A store that refuses every write for the whole run: nothing was acknowledged, so
    "every acknowledged change is accounted for" would vouch for nothing. Exit 1."""
    done, report = torture_cli(
        "--url",
        "broken",
        "--factory",
        f"tests.support.broken:{RefusingBackend.__name__}",
        "-o",
        f"path={tmp_path}/t.db",
        "--seconds",
        "2",
        "--kill-rate",
        "0",
        "--writers",
        "2",
        "--readers",
        "1",
        tmp_path=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert report["operations"]["append"]["calls"] > 0, report["operations"]
    assert report["operations"]["append"]["ok"] == 0, report["operations"]
    assert not report["ok"] and report["findings"]["idle"]["count"] == 1, report["findings"]
    assert "FAILED" in done.stdout and "accounted for" not in done.stdout


def test_memory_and_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="private to each process"):
        run_torture("memory://")
    with pytest.raises(ConfigurationError):
        run_torture(f"sqlite:///{tmp_path}/t.db", TortureSettings(writers=0))
    done, report = torture_cli("--url", "memory://", tmp_path=tmp_path)
    assert done.returncode == 1 and report is None
    assert done.stderr.startswith("error: ConfigurationError") and "Traceback" not in done.stderr
    # The app's global --url reaches the command too (refused for the same reason,
    # instead of running on the default SQLite file).
    done = subprocess.run(
        [sys.executable, "-m", "memvault", "--url", "memory://", "torture"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "private to each process" in done.stderr
    assert not (tmp_path / "memvault.db").exists()


def test_server_faults_without_a_server_are_refused(tmp_path: Path) -> None:
    """``--server-faults kill`` on a store the torture did not start cannot crash
    anything: refused before the run, rather than a run that says OK without one
    server fault."""
    done, report = torture_cli(
        "--url",
        f"sqlite:///{tmp_path}/t.db",
        "--seconds",
        "1",
        "--server-faults",
        "kill",
        tmp_path=tmp_path,
    )
    assert done.returncode == 1 and report is None, done.stdout + done.stderr
    assert done.stderr.startswith("error: ConfigurationError") and "--server" in done.stderr
    assert not (tmp_path / "t.db").exists()


# --- the audit, on one real history altered one violation at a time --------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Records:
    folder = tmp_path_factory.mktemp("torture")
    path = run_torture(
        f"sqlite:///{folder}/t.db",
        TortureSettings(
            writers=3,
            readers=1,
            seconds=4,
            kill_rate=1,
            fault_rate=0.05,
            seed=7,
            history=str(folder),
        ),
    )
    return [json.loads(line) for line in path.read_text().splitlines()]


def states(records: Records) -> list[dict[str, Any]]:
    return [r for r in records if r["e"] == "state"]


def busiest(records: Records) -> dict[str, Any]:
    return max(states(records), key=lambda s: len(s["history"]))


def acked_turn(records: Records) -> tuple[dict[str, Any], dict[str, Any]]:
    """An append acknowledged on its first attempt, in the busiest session, of 2+
    messages, visible at the end: its invoke and ok records."""
    state = busiest(records)
    visible = {m["id"] for m in state["history"]}
    invokes = {(r["w"], r["t"]): r for r in records if r["e"] == "invoke" and r["a"] == 1}
    for r in records:
        inv = invokes.get((r.get("w"), r.get("t")))
        if (
            r["e"] == "ok"
            and r["a"] == 1
            and inv
            and inv["s"] == state["s"]
            and len(inv["ids"]) > 1
            and set(inv["ids"]) <= visible
        ):
            return inv, r
    raise AssertionError("no suitable turn in the run")


def lose_acked_turn(records: Records) -> None:
    records.append({"e": "invoke", "w": 999, "t": 1, "s": 0, "a": 1, "ids": ["x.w999.t1.m0"]})
    records.append({"e": "ok", "w": 999, "t": 1, "s": 0, "a": 1, "version": 10**6, "ms": 1})


def corrupt_content(records: Records) -> None:
    busiest(records)["history"][0]["content"] += " (edited)"


def drop_event(records: Records) -> None:
    events = busiest(records)["events"]
    del events[len(events) // 2]


def move_snapshot(records: Records) -> None:
    snap = next(s for s in busiest(records)["snapshots"] if not s["auto"] and s["length"])
    snap["version"] += 1


def swap_messages(records: Records) -> None:
    history = busiest(records)["history"]
    history[0], history[1] = history[1], history[0]


def duplicate_message(records: Records) -> None:
    history = busiest(records)["history"]
    history[1] = dict(history[0])


def phantom_read(records: Records) -> None:
    view = next(r for r in records if r["e"] == "view" and len(r["ids"]) > 2)
    records.append({**view, "ids": view["ids"][::-1]})


def fail_acked_turn(records: Records) -> None:
    _, ok = acked_turn(records)
    ok["e"] = "failed"


def intrude(records: Records) -> None:
    history = busiest(records)["history"]
    history[-1] = {**history[-1], "id": "intruder"}


def raise_foreign_error(records: Records) -> None:
    records.append(
        {
            "e": "read_error",
            "w": 1,
            "s": 0,
            "corrupt": False,
            "foreign": True,
            "error": "KeyError: 'head'",
        }
    )


def lose_final_state(records: Records) -> None:
    state = busiest(records)
    records.remove(state)
    records.append({"e": "final_error", "s": state["s"], "corrupt": False, "error": "timeout"})


def _hidden_read(records: Records) -> tuple[dict[str, Any], int]:
    """A read of a past history holding a message that no longer is visible nor in a
    snapshot (a pop, trim or clear hid it): the read, and that message's index."""
    for state in states(records):
        held = {m["id"] for m in state["history"]}
        held |= {m["id"] for s in state["snapshots"] for m in s.get("messages", [])}
        for read in state["past"]:
            for i, m in enumerate(read.get("messages", [])):
                if m["id"] not in held:
                    return read, i
    raise AssertionError("the run hid no message outside a snapshot")


def rewrite_hidden(records: Records) -> None:
    read, i = _hidden_read(records)
    read["messages"][i] = {**read["messages"][i], "content": "rewritten"}


def delete_hidden(records: Records) -> None:
    read, i = _hidden_read(records)
    del read["messages"][i]


def unreadable_hidden(records: Records) -> None:
    read, _ = _hidden_read(records)
    del read["messages"]
    read.update(error="CorruptRecordError: the message is missing", corrupt=True)


@pytest.mark.parametrize(
    "alter,finding",
    [
        (rewrite_hidden, "corrupted"),
        (delete_hidden, "unlogged"),
        (unreadable_hidden, "corrupted"),
        (lose_acked_turn, "lost"),
        (corrupt_content, "corrupted"),
        (drop_event, "unlogged"),
        (move_snapshot, "snapshot_drift"),
        (swap_messages, "misplaced"),
        (duplicate_message, "duplicated"),
        (phantom_read, "phantom_reads"),
        (fail_acked_turn, "failed_but_present"),
        (intrude, "unexpected"),
        (raise_foreign_error, "foreign_errors"),
        (lose_final_state, "unverified"),
    ],
)
def test_the_audit_reports_each_violation(
    history: Records, alter: Callable[[Records], None], finding: str
) -> None:
    assert audit_records(history).ok, audit_records(history).summary()
    altered = copy.deepcopy(history)
    alter(altered)
    report = audit_records(altered)
    assert report.findings[finding].count > 0, report.summary()
    assert not report.ok


def test_the_settings_keep_their_former_name() -> None:
    """``TortureSettings`` was ``Settings``; code importing the old name still runs."""
    from memvault.torture import Settings as Former

    assert Former is TortureSettings


def test_an_interrupted_run_leaves_no_worker_running(tmp_path: Path) -> None:
    """Ctrl-C (a KeyboardInterrupt out of the progress callback) must stop every worker
    before run_torture returns: left to the interpreter's exit, a worker whose start was
    interrupted is unknown to multiprocessing and appends on forever, holding its
    parent's stdout open (a caller reading it to the end never returns)."""
    import multiprocessing

    calls = [0]

    def interrupt(status: Any) -> None:
        calls[0] += 1
        if status.phase == "running" and calls[0] > 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_torture(
            f"sqlite:///{tmp_path}/t.db",
            TortureSettings(writers=2, readers=1, seconds=60, kill_rate=0),
            progress=interrupt,
        )
    assert multiprocessing.active_children() == []


def test_slow_worker_starts_do_not_eat_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load, starting the workers can take longer than a short run: the run's
    seconds count from when they are all started, so its kills still happen."""
    from memvault.torture import runner

    start = runner._Fleet.start

    def slow_start(fleet: Any, slot: int) -> None:
        start(fleet, slot)
        if fleet.next_worker <= len(fleet.roles):  # the first starts only, not restarts
            time.sleep(0.6)

    monkeypatch.setattr(runner._Fleet, "start", slow_start)
    path = run_torture(
        f"sqlite:///{tmp_path}/t.db",
        TortureSettings(writers=2, readers=0, seconds=1, kill_rate=20, seed=3),
    )
    report = audit_history(path)
    assert report.ok and report.kills > 0, report.kills
