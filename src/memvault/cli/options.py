"""What every command's options share, for the commands that other packages register
on the app too (``torture``, ``ui``, ``mcp``): the ``--url`` option and the URL it
picks."""

from __future__ import annotations

from typing import Annotated

import typer

from memvault.urls import resolve

UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Store URL (default: $MEMVAULT_URL, else sqlite:///memvault.db)."),
]


def command_url(ctx: typer.Context, url: str | None) -> str:
    """The command's --url, else the app's global --url, else $MEMVAULT_URL, else the
    default."""
    return resolve(url or ctx.find_root().params.get("url"))
