"""The contract suite: subclass :class:`StoreContract` (or :class:`AsyncStoreContract`)
and give it a ``store_url`` fixture naming an empty store (or a ``backend_factory``).

Each part can also be used alone: ``BasicsContract`` (ordering, reads, pop/trim/clear,
fork, compact), ``WritesContract`` (idempotency, compare-and-set), ``SnapshotsContract``
(snapshots and rollback), ``SummariesContract`` (summarize, the two views),
``SearchContract``, ``VectorsContract`` (semantic and hybrid search, with the
test embedder :class:`ConceptEmbedder`), ``VersionsContract``
(``history(at_version=N)``), ``PagingContract`` (``sessions_page``),
``SerializationContract``, ``CorruptionContract`` (damaged data is loud),
``InputsContract``, ``ConcurrencyContract``, ``CancellationContract`` (cancelled
async calls: turns whole, retries once, no session's data to another; async face
only), ``DurabilityContract`` (reopen), ``TtlContract``, ``FaultsContract`` (errors
and retries) and ``ModelContract`` (against the reference).
"""

from __future__ import annotations

from memvault.testing.contract.base import ALL_CAPABILITIES, ContractBase
from memvault.testing.contract.basics import BasicsContract
from memvault.testing.contract.cancellation import CancellationContract
from memvault.testing.contract.concurrency import ConcurrencyContract
from memvault.testing.contract.corruption import CHAIN_DAMAGE, CorruptionContract
from memvault.testing.contract.durability import DurabilityContract
from memvault.testing.contract.faults import FaultsContract
from memvault.testing.contract.inputs import InputsContract
from memvault.testing.contract.paging import PagingContract
from memvault.testing.contract.reference import ModelContract
from memvault.testing.contract.search import SearchContract
from memvault.testing.contract.serialization import SerializationContract
from memvault.testing.contract.snapshots import SnapshotsContract
from memvault.testing.contract.summaries import SummariesContract
from memvault.testing.contract.ttl import TtlContract
from memvault.testing.contract.vectors import ConceptEmbedder, VectorsContract
from memvault.testing.contract.versions import VersionsContract
from memvault.testing.contract.writes import WritesContract


class StoreContract(
    BasicsContract,
    WritesContract,
    SnapshotsContract,
    SummariesContract,
    SearchContract,
    VectorsContract,
    VersionsContract,
    PagingContract,
    SerializationContract,
    CorruptionContract,
    InputsContract,
    ConcurrencyContract,
    CancellationContract,
    DurabilityContract,
    TtlContract,
    FaultsContract,
    ModelContract,
):
    """The whole contract, driven through the sync API."""

    face = "sync"


class AsyncStoreContract(StoreContract):
    """The whole contract, driven through the async API."""

    face = "async"


__all__ = [
    "ALL_CAPABILITIES",
    "CHAIN_DAMAGE",
    "AsyncStoreContract",
    "BasicsContract",
    "CancellationContract",
    "ConceptEmbedder",
    "ConcurrencyContract",
    "ContractBase",
    "CorruptionContract",
    "DurabilityContract",
    "FaultsContract",
    "InputsContract",
    "ModelContract",
    "PagingContract",
    "SearchContract",
    "SerializationContract",
    "SnapshotsContract",
    "StoreContract",
    "SummariesContract",
    "TtlContract",
    "VectorsContract",
    "VersionsContract",
    "WritesContract",
]
