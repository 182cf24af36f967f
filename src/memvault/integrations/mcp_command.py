"""The ``memvault mcp`` command (registered on the CLI app by :func:`register`).

It imports the MCP SDK only when it runs, so the CLI works without the ``mcp`` extra;
without it, the command says which extra to install.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from memvault.cli.options import UrlOption, command_url
from memvault.hosts import MCP_PORT


class TransportName(str, Enum):
    stdio = "stdio"
    http = "http"


def mcp(
    ctx: typer.Context,
    url: UrlOption = None,
    transport: Annotated[
        TransportName,
        typer.Option(
            help="stdio: the client starts this command and talks on its stdin and stdout; "
            "http: streamable HTTP on http://HOST:PORT/mcp."
        ),
    ] = TransportName.stdio,
    host: Annotated[
        str,
        typer.Option(
            help="Address the HTTP transport binds. Anything but loopback exposes the store "
            "to the network."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port of the HTTP transport (0: any).")
    ] = MCP_PORT,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Offer the read tools alone, and open the store read-only where the backend "
            "can (SQLite).",
        ),
    ] = False,
) -> None:
    """Serve the store to MCP clients (desktop assistants, IDE agents): tools to append,
    read, search, summarize, snapshot and roll back conversations."""
    from memvault.integrations.mcp import serve

    target = command_url(ctx, url)
    serve(target, transport=transport.value, host=host, port=port, read_only=read_only)


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command to the ``memvault`` app."""
    app.command("mcp")(mcp)
