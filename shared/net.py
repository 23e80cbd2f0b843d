"""Network address helpers every process may need, without importing any server machinery."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``, bracketed or not)."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
