"""Fixtures and helpers every contract part shares."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from memvault.checks.opener import BackendFactory, Opener
from memvault.messages import Message
from memvault.testing.workers import turn

__all__ = ["ContractBase", "texts", "turn", "users"]

ALL_CAPABILITIES = frozenset({"persistent", "multiprocess", "ttl", "corrupt", "vectors"})


class ContractBase:
    """What a backend's test class provides, and what the contract parts use.

    Provide a ``store_url`` fixture that names an empty store (a fresh file, a
    flushed database, a new schema), or, for a backend no URL scheme reaches, a
    ``backend_factory`` fixture returning a picklable callable that opens the
    backend on an empty store (see :class:`~memvault.testing.Opener`), and for a
    native async backend an ``async_backend_factory`` (the async face uses it). Every call
    of the ``opener`` fixture then opens a new connection to that same store;
    worker processes receive it pickled.

    Class attributes:
        face: ``"sync"`` or ``"async"``: which API the contract drives.
        capabilities: what the backend can do. A part whose capability is missing
            is skipped with that reason, never passed silently:
            ``persistent`` (data survives close and reopen), ``multiprocess``
            (several processes share one store), ``ttl`` (sliding expiry),
            ``corrupt`` (the test class overrides :meth:`corrupt`), ``vectors`` (it
            stores search vectors: ``memvault.open(url, embedder=...)`` works).
    """

    face: ClassVar[str] = "sync"
    capabilities: ClassVar[frozenset[str]] = ALL_CAPABILITIES

    @pytest.fixture
    def backend_factory(self) -> BackendFactory | None:
        """A picklable callable returning a backend on an empty store (override for a
        backend without a URL scheme); None: open ``store_url``."""
        return None

    @pytest.fixture
    def async_backend_factory(self) -> BackendFactory | None:
        """Like ``backend_factory``, returning a native async backend (the
        :class:`~memvault.backends.base.AsyncBackend` protocol) for the async face;
        None: the async face runs ``backend_factory``'s backend on worker threads."""
        return None

    @pytest.fixture
    def store_url(
        self, backend_factory: BackendFactory | None, async_backend_factory: BackendFactory | None
    ) -> str:
        factory = backend_factory or async_backend_factory
        if factory is None:
            pytest.fail(
                "the test class must define a `store_url` fixture naming an empty "
                "store, or a `backend_factory` fixture"
            )
        return f"factory:{getattr(factory, '__qualname__', type(factory).__name__)}"

    @pytest.fixture
    def store_options(self) -> dict[str, Any]:
        """Options passed to every open (override to add backend options)."""
        return {}

    @pytest.fixture
    def opener(
        self,
        store_url: str,
        store_options: dict[str, Any],
        backend_factory: BackendFactory | None,
        async_backend_factory: BackendFactory | None,
    ) -> Opener:
        """Opens a new handle on the test's store at each call; picklable."""
        return Opener(
            store_url,
            self.face,  # type: ignore[arg-type]
            store_options,
            backend_factory,
            async_backend_factory,
        )

    @pytest.fixture
    def store(self, opener: Opener) -> Iterator[Any]:
        store = opener()
        yield store
        store.close()

    def require(self, capability: str) -> None:
        """Skip the calling test, naming the capability the backend declares it lacks."""
        if capability not in self.capabilities:
            pytest.skip(f"the backend declares no {capability!r} capability")

    def corrupt(self, store: Any, session_id: str, depth: int, body: str | bytes) -> None:
        """Overwrite the stored body of the message at ``depth`` with ``body`` (bytes
        are stored as they are; skip if the backend's storage cannot hold them)."""
        pytest.skip("the test class does not implement corrupt()")


def texts(messages: list[Message]) -> list[Any]:
    return [m.content for m in messages]


def users(n: int, prefix: str = "m") -> list[Message]:
    return [Message.user(f"{prefix}{i}") for i in range(n)]
