"""Store URLs to backends. Backend modules are imported lazily, so a missing
optional dependency fails only when its scheme is used, naming the extra."""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

from memvault.errors import ConfigurationError

DEFAULT_URL = "sqlite:///memvault.db"

# scheme -> (backend module, extra that installs its driver)
SCHEMES: dict[str, tuple[str, str | None]] = {
    "memory": ("memvault.backends.memory", None),
    "sqlite": ("memvault.backends.sqlite", None),
    "redis": ("memvault.backends.redis", "redis"),
    "rediss": ("memvault.backends.redis", "redis"),
    "redis+unix": ("memvault.backends.redis", "redis"),
    "postgresql": ("memvault.backends.postgres", "postgres"),
    "postgres": ("memvault.backends.postgres", "postgres"),
}


def resolve(url: str | None) -> str:
    """The URL to open: the argument, else ``$MEMVAULT_URL``, else the SQLite default."""
    if url is None:
        url = os.environ.get("MEMVAULT_URL") or DEFAULT_URL
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"a store URL must be a non-empty string, not {url!r}")
    return url


# user:password@ right after a "//". The password runs to the last "@" before the next
# "/": an unencoded "#", "?" or "@" in it still ends up hidden. Matched by hand: urlsplit
# finds no password when the scheme is not a valid one ("://u:pw@h", "bäd://u:pw@h")
# and raises on a bad host ("[bad"), yet such strings end up in errors.
_USERINFO = re.compile(r"^(?P<head>.*?//[^/?#:@]*):[^/]*@", re.DOTALL)
# A password given as a query parameter (libpq's ?password=, sslpassword=, ...), up to
# the next "&" ("#" included: unencoded, it may be part of the password).
_QUERY_PASSWORD = re.compile(r"(?P<name>[?&][^=&]*password=)[^&]*", re.IGNORECASE)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (for errors, logs and repr): the
    one in ``user:password@`` and any query parameter whose name ends in
    ``password``."""
    url = _USERINFO.sub(r"\g<head>:***@", url, count=1)
    return _QUERY_PASSWORD.sub(r"\g<name>***", url)


def open_backend(url: str, options: dict[str, Any], *, asynchronous: bool) -> Any:
    """Open the backend ``url`` names.

    A backend module has ``open_backend(url, **options)``, and
    ``open_async_backend`` when its driver has a native async client; otherwise its
    async face runs the sync backend on worker threads.
    """
    module = backend_module(url)
    if not asynchronous:
        return module.open_backend(url, **options)
    if hasattr(module, "open_async_backend"):
        return module.open_async_backend(url, **options)
    from memvault.backends.base import ThreadedAsyncBackend

    return ThreadedAsyncBackend(module.open_backend(url, **options))


def backend_module(url: str) -> Any:
    """The module implementing the backend ``url`` names (imported on first use)."""
    match = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", url)
    scheme = match.group(1).lower() if match else ""
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(f"unknown store URL {redact(url)!r}: the schemes are {known}")
    module, extra = SCHEMES[scheme]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigurationError(
            f"{scheme}:// needs an optional dependency ({exc.name}): "
            f"pip install 'memvault[{extra}]'"
        ) from exc


def call_with_options(factory: Any, url: str, *args: Any, **options: Any) -> Any:
    """Call a backend factory, turning an unknown keyword into a ConfigurationError."""
    try:
        return factory(*args, **options)
    except TypeError as exc:
        if "argument" not in str(exc):
            raise
        raise ConfigurationError(f"{redact(url)}: unsupported option ({exc})") from exc
