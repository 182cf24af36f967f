"""A syrupy extension that stores a store's logical state as a readable baseline.

Use it through the plugin's ``store_snapshot`` fixture::

    def test_agent_flow(memvault_store, store_snapshot):
        run_my_agent(memvault_store)
        assert store_snapshot == memvault_store

``pytest --snapshot-update`` writes ``__snapshots__/<module>/<test>.memvault.json``;
commit it. On a mismatch the report names the session and the missing, extra or
changed messages, snapshots and events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from memvault.testing.state import diff_states, dump_state, render_state


class StoreStateExtension(SingleFileSnapshotExtension):
    """Serializes a store (or a :func:`~memvault.testing.dump_state` dict) to JSON text."""

    file_extension = "memvault.json"
    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **kwargs: Any) -> str:
        state = data if isinstance(data, dict) else dump_state(data)
        return render_state(state)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        try:
            expected, actual = json.loads(str(snapshot_data)), json.loads(str(serialized_data))
        except ValueError:  # not a state dump: fall back to syrupy's text diff
            yield from super().diff_lines(serialized_data, snapshot_data)
            return
        yield from diff_states(expected, actual) or ["(no logical difference)"]


__all__ = ["StoreStateExtension"]
