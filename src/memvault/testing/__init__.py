"""memvault's pytest toolkit: certify any memory backend, ours or yours.

Example::

    import pytest
    from memvault.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_url(self, tmp_path):
            return f"sqlite:///{tmp_path}/memory.db"

Names are imported on first use, so importing the pytest plugin stays cheap.
See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "AsyncStoreContract": "memvault.testing.contract",
    "StoreContract": "memvault.testing.contract",
    "BasicsContract": "memvault.testing.contract",
    "CancellationContract": "memvault.testing.contract",
    "ConcurrencyContract": "memvault.testing.contract",
    "ContractBase": "memvault.testing.contract",
    "CorruptionContract": "memvault.testing.contract",
    "CHAIN_DAMAGE": "memvault.testing.contract",
    "DurabilityContract": "memvault.testing.contract",
    "FaultsContract": "memvault.testing.contract",
    "InputsContract": "memvault.testing.contract",
    "ModelContract": "memvault.testing.contract",
    "PagingContract": "memvault.testing.contract",
    "SerializationContract": "memvault.testing.contract",
    "SearchContract": "memvault.testing.contract",
    "VectorsContract": "memvault.testing.contract",
    "ConceptEmbedder": "memvault.testing.contract",
    "SnapshotsContract": "memvault.testing.contract",
    "SummariesContract": "memvault.testing.contract",
    "TtlContract": "memvault.testing.contract",
    "VersionsContract": "memvault.testing.contract",
    "WritesContract": "memvault.testing.contract",
    "ALL_CAPABILITIES": "memvault.testing.contract",
    "Opener": "memvault.checks.opener",
    "BackendFactory": "memvault.checks.opener",
    "check_concurrent_appends": "memvault.checks.lostwrites",
    "analyze_history": "memvault.checks.lostwrites",
    "LostWriteReport": "memvault.checks.report",
    "Finding": "memvault.checks.report",
    "dump_state": "memvault.testing.state",
    "dump_state_async": "memvault.testing.state",
    "diff_states": "memvault.testing.state",
    "render_state": "memvault.testing.state",
    "StoreStateExtension": "memvault.testing.syrupy_ext",
    "FaultInjector": "memvault.checks.faults",
    "inject_faults": "memvault.checks.faults",
    "StoreModel": "memvault.testing.reference",
    "model_machine": "memvault.testing.reference",
    "check_against_model": "memvault.testing.reference",
    "open_seeded": "memvault.testing.seeds",
    "copy_sqlite": "memvault.testing.seeds",
}

__all__ = [
    "ALL_CAPABILITIES",
    "CHAIN_DAMAGE",
    "AsyncStoreContract",
    "BackendFactory",
    "BasicsContract",
    "CancellationContract",
    "ConceptEmbedder",
    "ConcurrencyContract",
    "ContractBase",
    "CorruptionContract",
    "DurabilityContract",
    "FaultInjector",
    "FaultsContract",
    "Finding",
    "InputsContract",
    "LostWriteReport",
    "ModelContract",
    "Opener",
    "PagingContract",
    "SearchContract",
    "SerializationContract",
    "SnapshotsContract",
    "StoreContract",
    "StoreModel",
    "StoreStateExtension",
    "SummariesContract",
    "TtlContract",
    "VectorsContract",
    "VersionsContract",
    "WritesContract",
    "analyze_history",
    "check_against_model",
    "check_concurrent_appends",
    "copy_sqlite",
    "diff_states",
    "dump_state",
    "dump_state_async",
    "inject_faults",
    "model_machine",
    "open_seeded",
    "render_state",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'memvault.testing' has no attribute {name!r}")
    # Not cached here: the module in sys.modules stays the one source of truth
    # (pytester's in-process runs drop and re-import modules between runs).
    return getattr(importlib.import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from memvault.checks.faults import FaultInjector, inject_faults
    from memvault.checks.lostwrites import analyze_history, check_concurrent_appends
    from memvault.checks.opener import BackendFactory, Opener
    from memvault.checks.report import Finding, LostWriteReport
    from memvault.testing.contract import (
        ALL_CAPABILITIES,
        CHAIN_DAMAGE,
        AsyncStoreContract,
        BasicsContract,
        CancellationContract,
        ConceptEmbedder,
        ConcurrencyContract,
        ContractBase,
        CorruptionContract,
        DurabilityContract,
        FaultsContract,
        InputsContract,
        ModelContract,
        PagingContract,
        SearchContract,
        SerializationContract,
        SnapshotsContract,
        StoreContract,
        SummariesContract,
        TtlContract,
        VectorsContract,
        VersionsContract,
        WritesContract,
    )
    from memvault.testing.reference import StoreModel, check_against_model, model_machine
    from memvault.testing.seeds import copy_sqlite, open_seeded
    from memvault.testing.state import diff_states, dump_state, dump_state_async, render_state
    from memvault.testing.syrupy_ext import StoreStateExtension
