"""Checking tools that need no pytest: open a store from a picklable recipe
(:mod:`~memvault.checks.opener`), inject faults (:mod:`~memvault.checks.faults`),
record concurrent appends and audit what the store kept
(:mod:`~memvault.checks.lostwrites`, :mod:`~memvault.checks.report`).

The pytest toolkit (:mod:`memvault.testing`, which re-exports them) and
``memvault torture`` both build on them; neither imports the other.
"""
