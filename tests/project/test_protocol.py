"""The backend protocol is documented, method by method, and its faces agree."""

from __future__ import annotations

import inspect

from memvault.backends import base
from memvault.backends.engine.core import Txn

SYNC = (base.Backend, base.Searching, base.VectorStore)
ASYNC = (base.AsyncBackend, base.AsyncSearching, base.AsyncVectorStore)


def test_every_protocol_method_has_a_docstring() -> None:
    """What each method is given, returns, raises and promises is written on it (the
    async twins point at their sync method)."""
    undocumented = [
        f"{protocol.__name__}.{name}"
        for protocol in (*SYNC, *ASYNC, Txn)
        for name in base.declared(protocol)
        if not inspect.getdoc(getattr(protocol, name))
    ]
    assert undocumented == []
    for protocol in SYNC:
        assert inspect.getdoc(protocol), protocol


def test_the_async_protocols_are_the_sync_ones_awaited() -> None:
    for sync, asynchronous in zip(SYNC, ASYNC, strict=True):
        assert base.declared(sync) == base.declared(asynchronous)
        for name in base.declared(sync):
            method = getattr(asynchronous, name)
            assert inspect.iscoroutinefunction(method), f"{asynchronous.__name__}.{name}"
            assert inspect.signature(method) == inspect.signature(getattr(sync, name)), name


def test_the_protocol_has_seventeen_methods_and_two_capabilities() -> None:
    assert len(base.PROTOCOL) == 17
    assert base.SEARCHING == ("search",)
    assert len(base.VECTOR_STORE) == 7
