"""The ``memvault ui`` command (registered on the CLI app by :func:`register`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from memvault.cli.options import UrlOption, command_url
from memvault.errors import MemvaultError

err = Console(stderr=True, highlight=False, soft_wrap=True)


def ui(
    ctx: typer.Context,
    url: UrlOption = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8737,
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind. Anything but loopback exposes the store to the network."
        ),
    ] = "127.0.0.1",
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Offer snapshot, rollback and fork (each undoable)."),
    ] = False,
) -> None:
    """Start the inspector, a local web app over the store, and print its address."""
    import memvault
    from memvault.ui import is_loopback, serve
    from memvault.urls import backend_module

    try:
        # Without --allow-writes, opened read-only where the backend can (SQLite: mode=ro).
        target = command_url(ctx, url)
        options = {} if allow_writes else getattr(backend_module(target), "READ_ONLY", {})
        with memvault.open(target, **options) as store:
            if not is_loopback(host):
                err.print(
                    f"[yellow]warning:[/yellow] binding {host}: anyone who can reach "
                    "this address can read the store",
                    markup=True,
                )
            serve(
                store,
                host=host,
                port=port,
                allow_writes=allow_writes,
                announce=lambda line: print(line, flush=True),
            )
    except MemvaultError as exc:
        err.print(f"[red]error:[/red] {type(exc).__name__}: {exc}", markup=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    """Add the ``ui`` command to the ``memvault`` app."""
    app.command("ui")(ui)
