"""Store URLs to backends: the registry of URL schemes.

A scheme names a backend: a module (or any object) with ``open_backend(url, **options)``
returning a :class:`~memvault.backends.base.Backend`, and ``open_async_backend`` when its
driver has a native async client (otherwise the async face runs the sync backend on
worker threads). memvault's own schemes and those other packages register under the
``memvault.backends`` entry-point group sit in one table::

    [project.entry-points."memvault.backends"]
    jsonfile = "memvault.examples.jsonfile"

The table is read, and a backend imported, only when a URL names it, so a missing
optional dependency fails only when its scheme is used, naming the extra to install.
"""

from __future__ import annotations

import os
import re
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from memvault.backends.base import AsyncBackend, Backend
from memvault.backends.threaded import ThreadedAsyncBackend
from memvault.backends.url import redact
from memvault.errors import ConfigurationError

DEFAULT_URL = "sqlite:///memvault.db"
ENTRY_POINT_GROUP = "memvault.backends"

# memvault's own schemes: scheme -> (backend module, extra that installs its driver).
# Another package cannot take one of these over.
BUILTIN: dict[str, tuple[str, str | None]] = {
    "memory": ("memvault.backends.memory", None),
    "sqlite": ("memvault.backends.sqlite.backend", None),
    "redis": ("memvault.backends.redis.backend", "redis"),
    "rediss": ("memvault.backends.redis.backend", "redis"),
    "redis+unix": ("memvault.backends.redis.backend", "redis"),
    "postgresql": ("memvault.backends.postgres.backend", "postgres"),
    "postgres": ("memvault.backends.postgres.backend", "postgres"),
}


def resolve(url: str | None) -> str:
    """The URL to open: the argument, else ``$MEMVAULT_URL``, else the SQLite default."""
    if url is None:
        url = os.environ.get("MEMVAULT_URL") or DEFAULT_URL
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"a store URL must be a non-empty string, not {url!r}")
    return url


def schemes() -> dict[str, EntryPoint]:
    """Every scheme a URL may name, memvault's own and the registered ones."""
    table = {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    table.update(
        {
            scheme: EntryPoint(scheme, module, ENTRY_POINT_GROUP)
            for scheme, (module, _) in BUILTIN.items()
        }
    )
    return table


def backend_module(url: str) -> Any:
    """What implements the backend ``url`` names (imported on first use): an object
    with ``open_backend`` and maybe ``open_async_backend``. memvault's own schemes
    are found without reading the installed packages' entry points."""
    match = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", url)
    scheme = match.group(1).lower() if match else ""
    if scheme in BUILTIN:
        module, extra = BUILTIN[scheme]
        entry = EntryPoint(scheme, module, ENTRY_POINT_GROUP)
    else:
        table = schemes()
        if scheme not in table:
            known = ", ".join(f"{s}://" for s in table)
            raise ConfigurationError(f"unknown store URL {redact(url)!r}: the schemes are {known}")
        entry, extra = table[scheme], None
    try:
        return entry.load()
    except ImportError as exc:
        install = (
            f"pip install 'memvault[{extra}]'"
            if extra
            else f"the backend registered as {entry.value!r} cannot be imported"
        )
        raise ConfigurationError(
            f"{scheme}:// needs an optional dependency ({exc.name}): {install}"
        ) from exc


def open_backend(url: str, options: dict[str, Any], module: Any = None) -> Backend:
    """Open the backend ``url`` names (or ``module``, given in its place), for the sync API."""
    module = backend_module(url) if module is None else module
    return cast(Backend, module.open_backend(url, **options))


def open_async_backend(url: str, options: dict[str, Any], module: Any = None) -> AsyncBackend:
    """Open the backend ``url`` names (or ``module``, given in its place), for the async
    API: its native async face, else its sync one run on worker threads."""
    module = backend_module(url) if module is None else module
    if hasattr(module, "open_async_backend"):
        return cast(AsyncBackend, module.open_async_backend(url, **options))
    return cast(AsyncBackend, ThreadedAsyncBackend(module.open_backend(url, **options)))


__all__ = [
    "DEFAULT_URL",
    "backend_module",
    "open_async_backend",
    "open_backend",
    "redact",
    "resolve",
    "schemes",
]
