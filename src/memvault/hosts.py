"""The addresses memvault's servers bind (the inspector, the MCP server): loopback or not."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
MCP_PORT = 8738
"""The MCP server's default HTTP port (the inspector's is 8737)."""


def is_loopback(host: str) -> bool:
    """True for a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
