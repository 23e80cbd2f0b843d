"""MCP tools of the time server. Read-only: nothing here changes anything."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, time
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from servers.time.settings import TimeSettings
from servers.time.zones import zone
from shared.hosting.main import server_main
from shared.protocol.policy import READ_ONLY_HINTS
from shared.serverkit import NexoServer

ZONE_FORMAT = "an IANA time-zone name such as 'Europe/Madrid', 'America/New_York' or 'UTC'"
TimeZoneArg = Annotated[str, Field(description=f"The time zone: {ZONE_FORMAT}.", examples=["Europe/Madrid"])]


class Now(BaseModel):
    timezone: str
    iso: str
    weekday: str
    utc_offset: str
    is_dst: bool


class Converted(BaseModel):
    source: Now
    target: Now
    difference_hours: float


def _describe(moment: datetime, zone_name: str) -> Now:
    offset = moment.utcoffset()
    hours = offset.total_seconds() / 3600 if offset is not None else 0.0
    dst = moment.dst()
    return Now(
        timezone=zone_name,
        iso=moment.isoformat(timespec="seconds"),
        weekday=moment.strftime("%A"),
        utc_offset=f"{hours:+.2f}".rstrip("0").rstrip("."),
        is_dst=bool(dst and dst.total_seconds()),
    )


def build_server(settings: TimeSettings, *, clock: Callable[[], datetime] | None = None) -> MCPServer[Any]:
    now_utc = clock or (lambda: datetime.now(UTC))
    server: MCPServer[Any] = NexoServer(
        "time",
        instructions="Current time and time-zone conversion. Times are ISO 8601.",
    )

    @server.tool(title="Current time", annotations=READ_ONLY_HINTS)
    def now(
        timezone_name: Annotated[
            str | None,
            Field(
                description=f"The time zone to tell the time in: {ZONE_FORMAT}. Omit for the operator's.",
                examples=["Europe/Madrid"],
            ),
        ] = None,
    ) -> Now:
        """The current date and time in a time zone (default: the operator's)."""
        name = timezone_name or settings.default_timezone
        return _describe(now_utc().astimezone(zone(name)), name)

    @server.tool(title="Convert a time between time zones", annotations=READ_ONLY_HINTS)
    def convert(
        time_hhmm: Annotated[
            str,
            Field(
                description="The wall-clock time to convert, HH:MM in 24-hour form.",
                pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
                examples=["14:30"],
            ),
        ],
        source_timezone: TimeZoneArg,
        target_timezone: TimeZoneArg,
    ) -> Converted:
        """Convert a wall-clock time today (HH:MM, 24-hour) from one time zone to another."""
        try:
            wall = time.fromisoformat(time_hhmm)
        except ValueError as exc:
            raise ToolError(
                f"time_hhmm must be HH:MM in 24-hour form, e.g. '14:30'; got {time_hhmm!r}"
            ) from exc
        src = zone(source_timezone)
        today = now_utc().astimezone(src).date()
        moment = datetime.combine(today, wall, tzinfo=src)
        target = moment.astimezone(zone(target_timezone))
        src_off = moment.utcoffset()
        dst_off = target.utcoffset()
        diff = (
            (dst_off.total_seconds() if dst_off else 0) - (src_off.total_seconds() if src_off else 0)
        ) / 3600
        return Converted(
            source=_describe(moment, source_timezone),
            target=_describe(target, target_timezone),
            difference_hours=diff,
        )

    return server


def main() -> int:
    return server_main("servers.time", lambda: build_server(TimeSettings()))
