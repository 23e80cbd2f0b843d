"""The texts a schedule is written in: timezones, cron expressions and macros, durations, instants.

Each is checked here and rendered back in the canonical form a stored schedule keeps; a text that
cannot be used is a :class:`ScheduleError` naming the problem and a valid form.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_DURATION = timedelta(days=3650)
_DURATION = re.compile(
    r"(?:(\d{1,12})\s*d)?\s*(?:(\d{1,12})\s*h)?\s*(?:(\d{1,12})\s*m)?\s*(?:(\d{1,12})\s*s)?", re.IGNORECASE
)


class ScheduleError(ValueError):
    """A schedule text or value that cannot be used; the message names the problem and a valid form."""


def timezone_of(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"unknown timezone {name!r}; use an IANA name such as 'Europe/Madrid', "
            "'America/New_York' or 'UTC'"
        ) from None


def require_aware(moment: datetime, name: str) -> None:
    if moment.utcoffset() is None:
        raise ValueError(f"{name}={moment.isoformat()!r} has no timezone; pass an aware datetime")


def cron_parts(body: str) -> tuple[str, str]:
    """(canonical text, expression for cronsim) of a cron expression or macro."""
    fields = body.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        macro = fields[0].lower()
        if macro == "@reboot":
            raise ScheduleError(
                "'@reboot' has no fire time here; use 'once_after 1m' for a single run soon after creation"
            )
        if macro not in MACROS:
            raise ScheduleError(
                f"unknown cron macro {fields[0]!r}; use one of {', '.join(MACROS)} "
                "or five fields such as '0 0 * * *'"
            )
        return macro, MACROS[macro]
    if len(fields) != 5:
        extra = ""
        if len(fields) in (6, 7):
            extra = "; seconds and year fields are not supported, fires are at most once a minute"
        raise ScheduleError(
            f"cron expression {body.strip()!r} has {len(fields)} fields, expected five "
            f"(minute hour day-of-month month day-of-week){extra}; e.g. '*/5 * * * *'"
        )
    expr = " ".join(fields)
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ScheduleError(
            f"cron expression {expr!r} is invalid ({str(exc).lower()} field); fields are "
            "minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec) "
            "day-of-week (0-7 or sun-sat), e.g. '0 9 * * mon-fri'"
        ) from None
    return expr, expr


def parse_duration(text: str, *, form: str) -> timedelta:
    body = text.strip()
    match = _DURATION.fullmatch(body)
    if not body or match is None:
        raise ScheduleError(
            f"{form} needs a duration such as '30m', '2h', '90s', '1d' or '1h30m' (got {body!r}); "
            f"e.g. '{form} 30m'"
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    try:
        length = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        length = timedelta.max
    if length <= timedelta(0):
        raise ScheduleError(f"{form} {body!r} is zero; give a positive duration such as '{form} 30m'")
    if length > MAX_DURATION:
        raise ScheduleError(
            f"{form} {body!r} is longer than {MAX_DURATION.days} days; use a cron expression "
            "such as '0 0 1 1 *' for yearly runs"
        )
    return length


def render_duration(length: timedelta) -> str:
    remaining = int(length.total_seconds())
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def render_instant(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def absolute_instant(text: str) -> datetime:
    """A stored one-shot instant: an ISO 8601 timestamp with an offset or Z."""
    try:
        instant = datetime.fromisoformat(text.strip().upper())
    except ValueError:
        instant = None
    if instant is None or instant.utcoffset() is None:
        raise ScheduleError(
            f"one-shot instant {text!r} is not an ISO 8601 timestamp with an offset; "
            "e.g. 'once_at 2026-12-01T09:00:00Z'"
        )
    return instant.astimezone(UTC)
