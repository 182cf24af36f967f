"""The result of a torture run: counts, latencies and findings (JSON-serializable)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from memvault.checks.report import MAX_SAMPLES, Finding, Findings

# What each finding means is in memvault.torture.audit's docstring.
VIOLATIONS = (
    "lost",
    "duplicated",
    "reordered",
    "torn",
    "corrupted",
    "unexpected",
    "failed_but_present",
    "misplaced",
    "snapshot_drift",
    "unlogged",
    "phantom_reads",
    "foreign_errors",
    "unverified",
    "idle",
)
NOTES = ("recovered", "unread")
OPERATIONS = ("append", "read", "snapshot", "pop", "rollback")
APPEND_RECORDS = ("invoke", "ok", "failed", "unknown")  # the lost-write checker's


# Counters, like runner.TortureSettings's knobs: alike in shape only.
@dataclass
class OpStats:
    """Calls of one kind: outcomes, and latency of the successful ones (ms)."""

    calls: int = 0
    ok: int = 0
    failed: int = 0
    unknown: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 1); None when there is no value."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def merge(into: Finding, other: Finding, prefix: str) -> None:
    """Add ``other``'s count and samples (prefixed) to ``into``."""
    into.count += other.count
    room = MAX_SAMPLES - len(into.samples)
    into.samples += [f"{prefix}{s}" for s in other.samples[: max(0, room)]]


@dataclass
class TortureReport(Findings):
    """The audit of one torture run.

    Attributes:
        run: the run's parameters (URL with the password redacted, seed, ...).
        kills: workers killed with SIGKILL during the run.
        late_kills: workers killed because they did not stop within the grace period.
        exits: workers that died on their own (each was restarted).
        faults: faults injected (``before``: not sent; ``after``: reply lost).
        server_kills: SIGKILLs (and restarts) of the private server, or of one node.
        outages: times the cutting proxy refused connections for a while.
        cuts: connections the proxy cut, by kind (``before`` a request reached the
            server, ``mid-reply``, ``outage``).
        operations: per kind of call.
        findings: violations (all must be 0); see :mod:`memvault.torture.audit`.
        notes: what is allowed but worth knowing (``recovered``: appends whose
            outcome was unknown and that landed; ``unread``: messages hidden by a pop
            whose outcome was unknown, so their content was never read back).
        sessions: per session, what the final state holds.
        history_file: the JSONL history the audit read (re-check it with
            ``memvault.torture.audit_history``).
    """

    findings: dict[str, Finding] = field(default_factory=lambda: {k: Finding() for k in VIOLATIONS})
    notes: dict[str, Finding] = field(default_factory=lambda: {k: Finding() for k in NOTES})
    run: dict[str, Any] = field(default_factory=dict)
    kills: int = 0
    late_kills: int = 0
    exits: int = 0
    faults: int = 0
    server_kills: int = 0
    outages: int = 0
    cuts: dict[str, int] = field(default_factory=dict)
    operations: dict[str, OpStats] = field(
        default_factory=lambda: {k: OpStats() for k in OPERATIONS}
    )
    sessions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def operations_total(self) -> int:
        return sum(s.calls for s in self.operations.values())

    def summary(self) -> str:
        """A paragraph for an assertion message or a terminal."""
        return self._summary(
            f"{self.operations_total} calls, {self.kills} kills, "
            f"{self.faults} faults; history: {self.history_file}",
            3,
            "; ",
        )


def count_operations(records: list[dict[str, Any]], report: TortureReport) -> None:
    """Calls per kind and outcome, and the latency of the successful ones."""
    latencies: dict[str, list[float]] = {k: [] for k in report.operations}
    for r in records:
        e = r["e"]
        if e not in (*APPEND_RECORDS, "call", "done", "view", "read_error"):
            continue
        kind = "append" if e in APPEND_RECORDS else r.get("k", "read")
        stats = report.operations[kind]
        if e in ("invoke", "call", "view", "read_error"):
            stats.calls += 1
        outcome = {
            "ok": "ok",
            "failed": "failed",
            "unknown": "unknown",
            "view": "ok",
            "read_error": "failed",
            "done": r.get("outcome"),
        }.get(e)
        if outcome:
            setattr(stats, outcome, getattr(stats, outcome) + 1)
        if "ms" in r:
            latencies[kind].append(r["ms"])
        if r.get("fault"):
            report.faults += 1
        if r.get("foreign"):
            report.findings["foreign_errors"].add(f"w{r['w']}: {r['error']}")
    for kind, stats in report.operations.items():
        stats.unknown += stats.calls - stats.ok - stats.failed - stats.unknown  # cut short
        stats.p50_ms = percentile(latencies[kind], 0.50)
        stats.p99_ms = percentile(latencies[kind], 0.99)
