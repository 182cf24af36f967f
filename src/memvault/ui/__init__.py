"""The inspector: a local web app to see, compare and repair conversations.

``memvault ui`` (or :func:`serve`) starts it over any store; :func:`create_app`
gives the ASGI app itself. Needs the ``ui`` extra: ``pip install 'memvault[ui]'``.
It reads through the public API and the event log only; see ``docs/inspector.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memvault.errors import ConfigurationError
from memvault.hosts import LOOPBACK_NAMES, is_loopback

if TYPE_CHECKING:
    from starlette.applications import Starlette

    import memvault


def create_app(store: memvault.Store, **options: Any) -> Starlette:
    """The inspector's ASGI app over an open store; see :func:`memvault.ui.app.create_app`."""
    try:
        from memvault.ui.app import create_app as make
    except ImportError as exc:
        raise ConfigurationError(
            f"the inspector needs the 'ui' extra: pip install 'memvault[ui]' ({exc})"
        ) from exc
    return make(store, **options)


def serve(
    store: memvault.Store,
    *,
    host: str = "127.0.0.1",
    port: int = 8737,
    allow_writes: bool = False,
    announce: Any = print,
) -> None:
    """Run the inspector until interrupted (Ctrl-C).

    Args:
        store: an open store.
        host: the address to bind; loopback unless told otherwise.
        port: the TCP port.
        allow_writes: offer snapshot, rollback and fork (each needs the per-run token).
        announce: called with the line that gives the address.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigurationError(
            f"the inspector needs the 'ui' extra: pip install 'memvault[ui]' ({exc})"
        ) from exc
    # Behind a loopback bind, only loopback Host names are served (DNS rebinding).
    hosts = [host, *LOOPBACK_NAMES] if is_loopback(host) and ":" not in host else None
    app = create_app(store, allow_writes=allow_writes, allowed_hosts=hosts)
    shown = f"[{host}]" if ":" in host else host
    mode = "writes allowed" if allow_writes else "read-only"
    announce(f"memvault inspector on http://{shown}:{port}/ ({mode}); Ctrl-C to stop")
    uvicorn.run(app, host=host, port=port, log_level="warning")


__all__ = ["create_app", "is_loopback", "serve"]
