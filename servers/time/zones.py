"""Time-zone lookup with errors a model can act on."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver.exceptions import ToolError


class UnknownTimeZone(ToolError, ValueError):
    """Raised for a name that is not an IANA time zone; a ValueError so settings validation reports it."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimeZone(
            f"unknown time zone {name!r}: use an IANA name such as "
            "'UTC', 'Europe/Madrid' or 'America/New_York'"
        ) from exc
