"""Where an HTTP server's bearer token was read from, for the message shown when it is refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_FILE = re.compile(r"^\$\{file:([^}]+)\}$")
_VARIABLE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}$")


def token_origin(name: str, raw_server: Any, *, file: str, env: Mapping[str, str]) -> str:
    """``raw_server`` is the server's entry as written in the YAML, before ``${...}`` is replaced."""
    key = f"servers.{name}.token"
    override = f"NEXO_SERVERS__{name.upper()}__TOKEN"
    if override in env:
        return f"the environment variable {override} (it overrides {key})"
    raw = raw_server.get("token") if isinstance(raw_server, Mapping) else None
    if raw is None:
        return f"nowhere: {key} is not set in {file}"
    text = str(raw).strip()
    if match := _FILE.match(text):
        return f"the file {match.group(1)} ({key} in {file})"
    if match := _VARIABLE.match(text):
        return f"the environment variable {match.group(1)} ({key} in {file})"
    return f"{key} in {file}"
