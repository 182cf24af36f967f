"""The ``memvault migrate`` command; :func:`register` adds it to the ``memvault`` app.

For a backend module with a ``migrate(url, schema=...)`` function (PostgreSQL),
it applies the missing schema migrations: safe to repeat, and safe to run from
several processes at once. Other backends bring their schema up to date
whenever a store is opened, so for them the command opens and closes the store.
"""

from __future__ import annotations

from typing import Annotated

import typer

import memvault
from memvault.errors import ConfigurationError, MemvaultError
from memvault.urls import _backend_module, redact, resolve

UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Store URL (default: $MEMVAULT_URL, else sqlite:///memvault.db)."),
]
SchemaOption = Annotated[
    str | None,
    typer.Option("--schema", help="PostgreSQL schema (default: the URL's, else 'memvault')."),
]


def register(app: typer.Typer) -> None:
    """Add the ``migrate`` command to ``app``."""
    app.command("migrate")(migrate)


def migrate(ctx: typer.Context, url: UrlOption = None, schema: SchemaOption = None) -> None:
    """Create or upgrade a store's schema (PostgreSQL: apply missing migrations)."""
    parent_url = ctx.parent.params.get("url") if ctx.parent is not None else None
    try:
        target = resolve(url or parent_url)
        typer.echo(_migrate(target, schema))
    except MemvaultError as exc:
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None


def _migrate(url: str, schema: str | None) -> str:
    module = _backend_module(url)
    if hasattr(module, "migrate"):
        result = module.migrate(url, schema=schema)
        if result.before == result.after:
            return f"{redact(url)}: schema {result.schema!r} is up to date (version {result.after})"
        return (f"{redact(url)}: schema {result.schema!r} migrated from version "
                f"{result.before} to {result.after}")
    if schema is not None:
        raise ConfigurationError(f"--schema applies to PostgreSQL only, not {redact(url)!r}")
    memvault.open(url).close()
    return f"{redact(url)}: schema is up to date (applied when a store is opened)"
