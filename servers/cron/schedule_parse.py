"""Parsing a schedule text at a given time, and refusing schedules whose fires come too close."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta, tzinfo
from itertools import islice, pairwise

from servers.cron.cron_walk import GAP_SAMPLE, offset_changes
from servers.cron.schedule import Schedule, fires_until
from servers.cron.schedule_forms import (
    ScheduleError,
    cron_parts,
    parse_duration,
    render_duration,
    render_instant,
    require_aware,
    timezone_of,
)

MIN_GAP_S = 60.0
"""The shortest time allowed between two fires of one recurring schedule."""

_FORMS = (
    "'*/5 * * * *', 'cron 0 9 * * mon-fri', '@daily', 'every 30m', 'every 1h30m', "
    "'once_after 2h', 'once_at 09:00', 'once_at 2026-12-01 09:00' or 'once_at 2026-12-01T09:00:00Z'"
)
_DST_MARGIN = timedelta(hours=3)
_DST_WINDOW_FIRES = 2000

_CRON_PREFIX = re.compile(r"cron(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_EVERY_PREFIX = re.compile(r"every(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_ONCE_AFTER_PREFIX = re.compile(r"once_after(?:(?:_|\s+)(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_ONCE_AT_PREFIX = re.compile(r"once_at(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_CRONISH_MINUTE = re.compile(r"[0-9*/,\-]+")
_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_LOCAL_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", re.IGNORECASE)


def parse_schedule(text: str, *, timezone: str = "UTC", now: datetime) -> Schedule:
    """Parse a schedule text (a cron expression, ``every``, ``once_after`` or ``once_at``) at `now`.

    Recurring schedules are anchored at `now` (to the second). Refuses recurring schedules with two
    fires closer than ``MIN_GAP_S``: for cron, over the next ``GAP_SAMPLE`` fires and over every
    DST change of the timezone in the coming year (all fires from three hours before to three
    hours after it), the places where wall-clock arithmetic could bunch fires together.
    """
    require_aware(now, "now")
    zone = timezone_of(timezone)
    raw = text.strip()
    if not raw:
        raise ScheduleError(f"the schedule is empty; use one of {_FORMS}")
    created = now.astimezone(UTC).replace(microsecond=0)
    if match := _CRON_PREFIX.fullmatch(raw):
        return _parse_cron(match["body"] or "", timezone, created)
    if match := _EVERY_PREFIX.fullmatch(raw):
        every = parse_duration(match["body"] or "", form="every")
        if every.total_seconds() < MIN_GAP_S:
            raise ScheduleError(
                f"'every {render_duration(every)}' fires more often than once every {MIN_GAP_S:.0f} s; "
                "use 'every 1m' or longer"
            )
        return Schedule("interval", f"every {render_duration(every)}", timezone, created)
    if match := _ONCE_AFTER_PREFIX.fullmatch(raw):
        delay = parse_duration(match["body"] or "", form="once_after")
        instant = now.astimezone(UTC) + delay
        if instant.microsecond:
            instant += timedelta(microseconds=1_000_000 - instant.microsecond)
        return _once(instant, timezone)
    if match := _ONCE_AT_PREFIX.fullmatch(raw):
        instant = _once_at_instant(match["body"] or "", zone, now.astimezone(UTC))
        return _once(instant, timezone)
    fields = raw.split()
    if fields[0].startswith("@") or (len(fields) > 1 and _CRONISH_MINUTE.fullmatch(fields[0])):
        return _parse_cron(raw, timezone, created)
    raise ScheduleError(f"unrecognised schedule {raw!r}; use one of {_FORMS}")


def _parse_cron(body: str, timezone: str, created: datetime) -> Schedule:
    canonical, expr = cron_parts(body)
    schedule = Schedule("cron", f"cron {canonical}", timezone, created)
    fires = list(islice(schedule.fires_after(created), GAP_SAMPLE))
    if not fires:
        raise ScheduleError(
            f"cron expression {expr!r} never fires in the next 50 years; "
            "check the day-of-month and month fields, e.g. '0 9 1 * *'"
        )
    _require_min_gap(schedule, fires)
    for start, end in offset_changes(schedule.zone, created):
        window = islice(schedule.fires_after(start - _DST_MARGIN), _DST_WINDOW_FIRES)
        _require_min_gap(schedule, fires_until(window, end + _DST_MARGIN))
    return schedule


def _require_min_gap(schedule: Schedule, fires: list[datetime]) -> None:
    for earlier, later in pairwise(fires):
        gap = (later - earlier).total_seconds()
        if gap < MIN_GAP_S:
            raise ScheduleError(
                f"{schedule.spec!r} in {schedule.timezone} fires at {earlier.isoformat()} and "
                f"{later.isoformat()}, {gap:.0f} s apart; fires must be at least {MIN_GAP_S:.0f} s "
                "apart, use a coarser expression such as '*/5 * * * *'"
            )


def _once(instant: datetime, timezone: str) -> Schedule:
    return Schedule("once", f"once_at {render_instant(instant)}", timezone, instant)


def _once_at_instant(text: str, zone: tzinfo, now: datetime) -> datetime:
    """The instant of a ``once_at`` text: the earliest future instant the wall time denotes.

    ``HH:MM`` is today's or tomorrow's; a wall time repeated by fall-back means its first occurrence
    unless that one already passed (then the second, which is still the next time the clock shows it).
    """
    body = text.strip()
    if match := _TIME_OF_DAY.fullmatch(body):
        hour, minute, second = (int(part or 0) for part in match.groups())
        if hour > 23 or minute > 59 or second > 59:
            raise ScheduleError(
                f"once_at {body!r} is not a time of day; use 24-hour HH:MM, e.g. 'once_at 09:00'"
            )
        today = now.astimezone(zone).date()
        wall = datetime.combine(today, time(hour, minute, second))
        candidates = _wall_instants(wall, zone) + _wall_instants(wall + timedelta(days=1), zone)
        return next(instant for instant in candidates if instant > now)
    if _LOCAL_TIMESTAMP.match(body):
        try:
            parsed = datetime.fromisoformat(body.upper())
        except ValueError:
            raise ScheduleError(
                f"once_at {body!r} is not a valid date and time; e.g. 'once_at 2026-12-01 09:00' "
                "or 'once_at 2026-12-01T09:00:00+01:00'"
            ) from None
        candidates = (
            [parsed.astimezone(UTC)] if parsed.utcoffset() is not None else _wall_instants(parsed, zone)
        )
        future = [instant for instant in candidates if instant > now]
        if not future:
            raise ScheduleError(
                f"once_at {body!r} is in the past; it is now {render_instant(now)}, give a future time "
                "such as 'once_at 09:00' (the next 09:00) or 'once_after 10m'"
            )
        return future[0]
    raise ScheduleError(
        f"once_at needs a time (got {body!r}); e.g. 'once_at 09:00', 'once_at 2026-12-01 09:00' "
        "or 'once_at 2026-12-01T09:00:00Z'"
    )


def _wall_instants(wall: datetime, zone: tzinfo) -> list[datetime]:
    """The UTC instants a naive wall time denotes in `zone`, earliest first.

    A time skipped by a DST gap is moved forward by the gap (PEP 495's fold=0 reading); a time
    repeated by fall-back denotes both occurrences.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    instants = [first.astimezone(UTC)]
    if instants[0].astimezone(zone).replace(tzinfo=None) != wall:
        return instants
    second = wall.replace(tzinfo=zone, fold=1)
    if second.utcoffset() != first.utcoffset():
        instants.append(second.astimezone(UTC))
    return instants
