"""The lost-write checker: a clean run on real processes, and every finding it
reports, each shown on a history that has it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memvault.checks.lostwrites import checksum
from memvault.checks.report import Findings
from memvault.testing import LostWriteReport, analyze_history, check_concurrent_appends
from memvault.torture import TortureReport


def test_clean_run_on_sqlite(tmp_path: Path) -> None:
    history = tmp_path / "run" / "history.jsonl"
    report = check_concurrent_appends(
        f"sqlite:///{tmp_path}/db.sqlite",
        writers=3,
        readers=2,
        appends=30,
        turn_size=3,
        history_file=history,
    )
    assert report.ok, report.summary()
    assert report.outcomes == {"ok": 90, "failed": 0, "unknown": 0}
    assert report.messages == 270 and report.reads >= 2
    assert report.history_file == str(history) and history.exists()
    again = analyze_history(history)  # the kept file re-checks to the same report
    assert again.to_dict() == report.to_dict()
    data = json.loads(report.to_json())
    assert data["ok"] is True and data["findings"]["lost"] == {"count": 0, "samples": []}
    assert LostWriteReport.from_dict(data).to_dict() == report.to_dict()


def test_process_private_store_is_refused() -> None:
    with pytest.raises(ValueError, match="private to one process"):
        check_concurrent_appends("memory://")


def msg(mid: str, *, good: bool = True) -> dict[str, Any]:
    content = f"content of {mid}"
    return {
        "id": mid,
        "role": "user",
        "content": content,
        "sum": checksum("user", content) if good else "0" * 16,
    }


def audit_of(tmp_path: Path, records: list[dict[str, Any]]) -> LostWriteReport:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return analyze_history(path)


def turn(w: int, t: int, outcome: str | None) -> list[dict[str, Any]]:
    ids = [f"w{w}.t{t}.m0", f"w{w}.t{t}.m1"]
    out: list[dict[str, Any]] = [{"e": "invoke", "w": w, "t": t, "ids": ids}]
    return out + ([{"e": outcome, "w": w, "t": t}] if outcome else [])


def test_every_finding_is_detected(tmp_path: Path) -> None:
    records = [{"e": "run", "writers": 2}]
    records += turn(0, 0, "ok") + turn(0, 1, "ok") + turn(0, 2, "ok")  # t2 lost
    records += turn(0, 3, "unknown") + turn(0, 4, None)  # recovered, recovered
    records += turn(1, 0, "failed") + turn(1, 1, "ok") + turn(1, 2, "ok")
    records += turn(1, 3, "ok") + turn(1, 4, "failed")  # w1.t4 not stored: fine
    final = [
        "w0.t1.m0",
        "w0.t1.m1",
        "w0.t0.m0",
        "w0.t0.m1",  # w0 reordered
        "w0.t3.m0",
        "w0.t3.m1",
        "w0.t4.m0",
        "w0.t4.m1",
        "w1.t0.m0",
        "w1.t0.m1",  # failed but present
        "w1.t1.m0",
        "w1.t2.m0",
        "w1.t1.m1",
        "w1.t2.m1",  # two torn turns
        "w1.t3.m0",  # torn (half)
        "stranger",
        "w0.t3.m0",
    ]  # unexpected, duplicated
    records.append({"e": "read", "r": 0, "ids": final[:3], "bad": []})
    records.append({"e": "read", "r": 1, "ids": ["w0.t0.m0"], "bad": ["w1.t0.m1"]})
    records.append({"e": "read_error", "r": 1, "corrupt": True, "error": "corrupt at depth 3"})
    records.append({"e": "final", "messages": [msg(i, good=(i != "w1.t3.m0")) for i in final]})
    report = audit_of(tmp_path, records)
    assert report.outcomes == {"ok": 6, "failed": 2, "unknown": 2}
    assert report.findings["lost"].samples == ["w0.t2"]
    assert report.notes["recovered"].samples == ["w0.t3", "w0.t4"]
    assert report.findings["failed_but_present"].samples == ["w1.t0"]
    assert report.findings["reordered"].samples == ["w0.t0 stored after w0.t1"]
    assert report.findings["torn"].samples == ["w1.t1", "w1.t2", "w1.t3"]  # w0.t3: duplicated
    assert report.findings["unexpected"].samples == ["stranger"]
    assert report.findings["duplicated"].samples == ["w0.t3.m0 x2"]
    assert report.findings["corrupted"].count == 3  # a bad checksum, a bad read, a corrupt read
    assert report.findings["non_prefix_reads"].count == 1 and report.reads == 2
    assert not report.ok and set(report.violations()) == set(LostWriteReport.VIOLATIONS)
    assert "lost: 1, e.g. w0.t2" in report.summary()


def test_samples_are_capped_at_32(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [{"e": "run"}]
    for t in range(40):
        records += turn(0, t, "ok")
    records.append({"e": "final", "messages": []})
    report = audit_of(tmp_path, records)
    assert report.findings["lost"].count == 40 and len(report.findings["lost"].samples) == 32


def test_both_audits_report_in_one_model_with_one_name_per_finding() -> None:
    """The torture audit reports the lost-write findings under their own names."""
    lost_writes, torture = LostWriteReport(), TortureReport()
    assert isinstance(lost_writes, Findings) and isinstance(torture, Findings)
    shared = set(lost_writes.findings) - {"non_prefix_reads"}  # torture: phantom_reads
    assert shared <= set(torture.findings) and set(lost_writes.notes) <= set(torture.notes)
    for report in (lost_writes, torture):
        report.findings["torn"].add("w0.t1")
        assert not report.ok and list(report.violations()) == ["torn"]
        assert report.to_dict()["findings"]["torn"] == {"count": 1, "samples": ["w0.t1"]}
