"""``memvault torture``: concurrent, killed and restarted workers, then a full audit.

Writer processes append, snapshot, roll back, pop and read on a few shared
sessions; reader processes read. Workers are killed with SIGKILL at random moments
and restarted, and a share of calls get an injected fault (not sent, or applied
with the reply lost). Every call is logged to a history file before and after it
is made; at the end the final state is read and :mod:`memvault.torture.audit`
proves that every acknowledged change is accounted for (its docstring describes
the accounting). POSIX only (SIGKILL, fork server).

Programmatic use::

    from memvault.torture import TortureSettings, audit_history, run_torture

    report = audit_history(run_torture("sqlite:////tmp/t.db", TortureSettings(seconds=10)))
    assert report.ok, report.summary()
"""

from __future__ import annotations

from memvault.torture.audit import audit_history, audit_records
from memvault.torture.command import register
from memvault.torture.report import TortureReport
from memvault.torture.runner import Status, TortureSettings, cleanup, run_torture

Settings = TortureSettings
"""The former name of :class:`TortureSettings` (one of three ``Settings``), kept so
code importing it keeps working."""

__all__ = [
    "Settings",
    "Status",
    "TortureReport",
    "TortureSettings",
    "audit_history",
    "audit_records",
    "cleanup",
    "register",
    "run_torture",
]
