"""How every adapter is built from a URL: ``from_conn_string`` returns an :class:`Opener`.

The three adapters (``MemvaultSession``, ``MemvaultChatMessageHistory``,
``MemvaultSaver``) are built the same two ways: from open stores (``store=`` a
:class:`memvault.Store` for the sync methods, ``async_store=`` a
:class:`memvault.AsyncStore` for the async ones; left open, they are yours), or
from a memvault URL with ``X.from_conn_string(...)``, a context manager that opens
the store and closes it on leaving: ``with`` opens a sync store, ``async with`` an
async one (LangGraph's ``from_conn_string`` convention).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, Generic, TypeVar

from memvault.aio import AsyncSession, AsyncStore, open_async
from memvault.errors import ConfigurationError
from memvault.store import Session, Store
from memvault.store import open as open_store

T = TypeVar("T")


class Opener(AbstractContextManager[T], AbstractAsyncContextManager[T], Generic[T]):
    """A sync and async context manager giving an adapter on a store it opens.

    ``build(store, async_store)`` makes the adapter from the store opened (the
    other one is None); if it raises, the store is closed at once.
    """

    def __init__(
        self,
        build: Callable[[Store | None, AsyncStore | None], T],
        url: str | None,
        options: dict[str, Any],
    ) -> None:
        self._build, self._url, self._options = build, url, options
        self._store: Store | None = None
        self._async_store: AsyncStore | None = None

    def __enter__(self) -> T:
        self._store = open_store(self._url, **self._options)
        try:
            return self._build(self._store, None)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    async def __aenter__(self) -> T:
        self._async_store = open_async(self._url, **self._options)
        try:
            return self._build(None, self._async_store)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._async_store is not None:
            await self._async_store.close()
            self._async_store = None


def checked(store: object, async_store: object) -> tuple[Store | None, AsyncStore | None]:
    """``store`` and ``async_store`` as an adapter's constructor takes them.

    Raises:
        ConfigurationError: neither given, or one of the wrong kind.
    """
    if store is None and async_store is None:
        raise ConfigurationError(
            "give store= (a memvault.Store) for the sync methods, "
            "async_store= (a memvault.AsyncStore) for the async ones"
        )
    for value, kind, name in ((store, Store, "store"), (async_store, AsyncStore, "async_store")):
        if value is not None and not isinstance(value, kind):
            raise ConfigurationError(
                f"{name}= must be a memvault.{kind.__name__}, not {type(value).__name__}"
            )
    return store, async_store  # type: ignore[return-value]


class OneSession:
    """What an adapter on one memvault session holds: its sync face, its async face, or
    both (LangChain's history, pydantic-ai's history)."""

    _sync: Session | None
    _async: AsyncSession | None

    def _bind(self, session_id: str, store: object, async_store: object) -> str:
        """Hold session ``session_id`` of the store(s) given; returns its checked id.

        Raises:
            ConfigurationError: neither store given, or one of the wrong kind.
            InvalidMessageError: an invalid session id.
        """
        sync_store, async_ = checked(store, async_store)
        self._sync = None if sync_store is None else sync_store.session(session_id)
        self._async = None if async_ is None else async_.session(session_id)
        return (self._sync or self._async).id  # type: ignore[union-attr]

    @property
    def session(self) -> Session:
        """The sync memvault session: ``snapshot``, ``rollback``, ``log``, ``fork``, ..."""
        if self._sync is None:
            raise ConfigurationError(f"this {type(self).__name__} has no sync store: pass store=")
        return self._sync

    @property
    def async_session(self) -> AsyncSession:
        """The async memvault session."""
        if self._async is None:
            raise ConfigurationError(
                f"this {type(self).__name__} has no async store: pass async_store="
            )
        return self._async
