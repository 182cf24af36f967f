"""The lost-write audit: what the history file proves about a run.

Findings, each with a ``count`` and up to :data:`MAX_SAMPLES` ``samples``
(turns are named ``w<writer>.t<turn>``):

==================== ==================================================== ============
finding              meaning                                              a violation?
==================== ==================================================== ============
lost                 acknowledged (``ok``) turns absent from the history  yes
unexpected           stored messages no writer ever sent                  yes
duplicated           message ids stored more than once                    yes
recovered            ``unknown`` turns that landed (allowed: a retry of    no
                     the same ids would have been a no-op)
failed_but_present   turns whose error promised nothing was applied,       yes
                     yet are stored
reordered            a writer's turns stored out of the order it sent them yes
corrupted            messages whose content fails its checksum, or reads   yes
                     that raised ``CorruptRecordError``
torn                 turns stored in part, or not adjacent and in order    yes
non_prefix_reads     reads during the run that were not a prefix of the    yes
                     final history (appends only ever extend it)
==================== ==================================================== ============
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from memvault.checks.history import (
    AppendCalled,
    AppendEnded,
    FinalHistory,
    HistoryRead,
    Outcome,
    ReadFailed,
    Record,
    RunStarted,
    StoredMessage,
)

MAX_SAMPLES = 32


@dataclass
class Finding:
    """How many times something happened, with up to 32 examples."""

    count: int = 0
    samples: list[str] = field(default_factory=list)

    def add(self, sample: str) -> None:
        self.count += 1
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(sample)


@dataclass
class _Turn:
    """One writer's append as the history tells it: its ids, how it ended."""

    ids: list[str]
    outcome: Outcome = "unknown"


@dataclass
class Findings:
    """The model every audit reports in (this one, the torture audit's).

    ``findings`` are violations, each of which must be 0; ``notes`` are allowed but
    worth knowing. A finding has the same name in every report that has it.
    """

    findings: dict[str, Finding] = field(default_factory=dict)
    notes: dict[str, Finding] = field(default_factory=dict)
    history_file: str = ""

    @property
    def ok(self) -> bool:
        """True when every finding is zero."""
        return not any(f.count for f in self.findings.values())

    def violations(self) -> dict[str, Finding]:
        """The findings that occurred."""
        return {name: f for name, f in self.findings.items() if f.count}

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-serializable, with ``ok``."""
        return {**asdict(self), "ok": self.ok}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def _summary(self, head: str, samples: int, sep: str) -> str:
        """``head`` after OK/VIOLATIONS, then one line per violation."""
        lines = [f"{'OK' if self.ok else 'VIOLATIONS'}: {head}"]
        for name, finding in self.violations().items():
            lines.append(f"  {name}: {finding.count}, e.g. {sep.join(finding.samples[:samples])}")
        return "\n".join(lines)


def _named(names: tuple[str, ...]) -> dict[str, Finding]:
    return {name: Finding() for name in names}


@dataclass
class LostWriteReport(Findings):
    """The audit of one run; ``to_dict()`` is JSON-serializable.

    Attributes:
        findings: the violations of :data:`VIOLATIONS` (see the module docstring).
        notes: ``recovered``.
        run: parameters of the run (``url``, ``session_id``, ``writers``, …).
        outcomes: calls per outcome: ``ok``, ``failed``, ``unknown``.
        reads: successful reads during the run.
        messages: messages in the final history.
        history_file: the JSONL history the audit read (kept for re-checking).
    """

    VIOLATIONS: ClassVar[tuple[str, ...]] = (
        "lost",
        "unexpected",
        "duplicated",
        "failed_but_present",
        "reordered",
        "corrupted",
        "torn",
        "non_prefix_reads",
    )
    NOTES: ClassVar[tuple[str, ...]] = ("recovered",)

    findings: dict[str, Finding] = field(default_factory=lambda: _named(LostWriteReport.VIOLATIONS))
    notes: dict[str, Finding] = field(default_factory=lambda: _named(LostWriteReport.NOTES))
    run: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: {"ok": 0, "failed": 0, "unknown": 0})
    reads: int = 0
    messages: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LostWriteReport:
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for group in ("findings", "notes"):
            if isinstance(kwargs.get(group), dict):
                kwargs[group] = {k: Finding(**v) for k, v in kwargs[group].items()}
        return cls(**kwargs)

    def summary(self) -> str:
        """One paragraph for an assertion message or a terminal."""
        return self._summary(
            f"{self.outcomes} calls, {self.reads} reads, {self.messages} "
            f"messages stored, {self.notes['recovered'].count} recovered; "
            f"history: {self.history_file}",
            5,
            ", ",
        )


def audit(records: Iterable[Record], checksum: Callable[[str, Any], str]) -> LostWriteReport:
    """Audit the records of a history file (see :mod:`memvault.checks.history`)."""
    report = LostWriteReport()
    found = report.findings
    turns: dict[tuple[int, int], _Turn] = {}
    final: list[StoredMessage] = []
    reads: list[HistoryRead] = []
    corrupt_ids: set[str] = set()
    for r in records:
        if isinstance(r, RunStarted):
            report.run = dict(r.params)
        elif isinstance(r, AppendCalled):
            turns[(r.writer, r.turn)] = _Turn(r.ids)
        elif isinstance(r, AppendEnded):
            turns[(r.writer, r.turn)].outcome = r.outcome
        elif isinstance(r, HistoryRead):
            reads.append(r)
            corrupt_ids.update(r.bad)
        elif isinstance(r, ReadFailed) and r.corrupt:
            kind = "final_error" if r.final else "read_error"
            found["corrupted"].add(f"{kind}: {r.error[:120]}")
        elif isinstance(r, FinalHistory):
            final = r.messages
    for turn in turns.values():
        report.outcomes[turn.outcome] += 1
    report.reads, report.messages = len(reads), len(final)

    ids = [m.id for m in final]
    where: dict[str, list[int]] = {}
    for i, mid in enumerate(ids):
        where.setdefault(mid, []).append(i)
    for mid, count in Counter(ids).items():
        if count > 1:
            found["duplicated"].add(f"{mid} x{count}")
    owner = {mid: key for key, turn in turns.items() for mid in turn.ids}
    for mid in dict.fromkeys(ids):
        if mid not in owner:
            found["unexpected"].add(mid)
    for m in final:
        if m.sum != checksum(m.role, m.content):
            corrupt_ids.add(m.id)
    for mid in sorted(corrupt_ids):
        found["corrupted"].add(mid)

    firsts: dict[int, list[tuple[int, int]]] = {}
    for (w, t), turn in sorted(turns.items()):
        name, present = f"w{w}.t{t}", [where.get(mid, []) for mid in turn.ids]
        if not any(present):
            if turn.outcome == "ok":
                found["lost"].add(name)
            continue
        spots = [p[0] for p in present if p]
        if len(spots) < len(present) or spots != list(range(spots[0], spots[0] + len(spots))):
            found["torn"].add(name)
        if turn.outcome == "unknown":
            report.notes["recovered"].add(name)
        elif turn.outcome == "failed":
            found["failed_but_present"].add(name)
        firsts.setdefault(w, []).append((spots[0], t))
    for w, seq in sorted(firsts.items()):
        order = [t for _, t in sorted(seq)]
        for a, b in itertools.pairwise(order):
            if b < a:
                found["reordered"].add(f"w{w}.t{b} stored after w{w}.t{a}")
    for read in reads:
        if read.ids != ids[: len(read.ids)]:
            found["non_prefix_reads"].add(
                f"reader {read.reader}: {len(read.ids)} messages, not a prefix"
            )
    return report


__all__ = ["MAX_SAMPLES", "Finding", "Findings", "LostWriteReport", "audit"]
