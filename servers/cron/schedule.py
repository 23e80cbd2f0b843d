"""Schedule arithmetic: parse schedule texts and compute fire times. Pure: the caller passes the time.

Three kinds of schedule:

- ``cron``: a five-field expression (or an ``@daily``-style macro) evaluated in an IANA timezone.
  Expressions with a fixed minute and hour ("30 2 * * *") follow Debian cron through cronsim: a wall
  time skipped by spring-forward fires at the first minute that exists, a wall time repeated by
  fall-back fires once, at its first occurrence. Expressions with a wildcard minute or hour
  ("0 * * * *") fire at every instant whose wall time matches: the fall-back day has 25 distinct
  hourly fires.
- ``interval``: a fixed number of seconds counted from the creation time, blind to DST.
- ``once``: a single instant, always stored in UTC.

``Schedule.next_after(t)`` is always later than ``t`` and never skips a fire, so feeding it its own
result visits every slot exactly once, and asking again after the clock stepped back returns a slot
already seen (which the store's uniqueness turns into a no-op) rather than a new one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, tzinfo
from itertools import islice, pairwise
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from servers.cron.cron_walk import GAP_SAMPLE, cron_fires, cron_nominal_interval, offset_changes

MIN_GAP_S = 60.0
"""The shortest time allowed between two fires of one recurring schedule."""

ScheduleKind = Literal["cron", "interval", "once"]

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FORMS = (
    "'*/5 * * * *', 'cron 0 9 * * mon-fri', '@daily', 'every 30m', 'every 1h30m', "
    "'once_after 2h', 'once_at 09:00', 'once_at 2026-12-01 09:00' or 'once_at 2026-12-01T09:00:00Z'"
)
_MAX_DURATION = timedelta(days=3650)
_DST_MARGIN = timedelta(hours=3)
_DST_WINDOW_FIRES = 2000

_CRON_PREFIX = re.compile(r"cron(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_EVERY_PREFIX = re.compile(r"every(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_ONCE_AFTER_PREFIX = re.compile(r"once_after(?:(?:_|\s+)(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_ONCE_AT_PREFIX = re.compile(r"once_at(?:\s+(?P<body>.*))?", re.IGNORECASE | re.DOTALL)
_CRONISH_MINUTE = re.compile(r"[0-9*/,\-]+")
_DURATION = re.compile(
    r"(?:(\d{1,12})\s*d)?\s*(?:(\d{1,12})\s*h)?\s*(?:(\d{1,12})\s*m)?\s*(?:(\d{1,12})\s*s)?", re.IGNORECASE
)
_TIME_OF_DAY = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_LOCAL_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", re.IGNORECASE)


class ScheduleError(ValueError):
    """A schedule text or value that cannot be used; the message names the problem and a valid form."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule. Build it with ``parse_schedule``; construct it directly only from stored fields."""

    kind: ScheduleKind
    spec: str
    """Canonical text that ``parse_schedule`` accepts back unchanged."""
    timezone: str
    """IANA name; cron expressions are evaluated in it."""
    anchor: datetime
    """Aware UTC. Recurring: the creation time (intervals count from it). Once: the instant."""
    _zone: tzinfo = field(init=False, repr=False, compare=False)
    _expr: str = field(init=False, repr=False, compare=False)
    _every: timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        zone = _zone(self.timezone)
        if self.anchor.utcoffset() is None:
            raise ScheduleError(
                f"schedule anchor {self.anchor.isoformat()!r} has no timezone; "
                "pass an aware datetime such as datetime.now(UTC)"
            )
        anchor = self.anchor.astimezone(UTC)
        expr, every = "", timedelta(0)
        if self.kind == "cron":
            body, expr = _cron_parts(self.spec.removeprefix("cron "))
            canonical = f"cron {body}"
        elif self.kind == "interval":
            every = _duration(self.spec.removeprefix("every "), form="every")
            canonical = f"every {_render_duration(every)}"
        elif self.kind == "once":
            instant = _absolute_instant(self.spec.removeprefix("once_at "))
            canonical = f"once_at {_render_instant(instant)}"
            if instant != anchor:
                raise ScheduleError(
                    f"one-shot spec {self.spec!r} and anchor {anchor.isoformat()!r} disagree; "
                    "the anchor of a once schedule is its instant"
                )
        else:
            raise ScheduleError(f"unknown schedule kind {self.kind!r}; expected 'cron', 'interval' or 'once'")
        if canonical != self.spec:
            raise ScheduleError(
                f"spec {self.spec!r} is not the canonical form for a {self.kind} schedule "
                f"(expected {canonical!r}); build schedules with parse_schedule()"
            )
        # The fast path of cronsim only applies to the stdlib UTC object.
        object.__setattr__(self, "_zone", UTC if self.timezone == "UTC" else zone)
        object.__setattr__(self, "anchor", anchor)
        object.__setattr__(self, "_expr", expr)
        object.__setattr__(self, "_every", every)

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after `after` (aware datetime, any zone) as an aware UTC datetime;
        None when a once schedule is past (or a cron expression has no fire in the next 50 years)."""
        _require_aware(after, "after")
        return next(self._fires_after(after), None)

    def slots_between(self, start: datetime, end: datetime, limit: int) -> list[datetime]:
        """Fires in (start, end], oldest first, at most `limit`."""
        _require_aware(start, "start")
        _require_aware(end, "end")
        if limit <= 0 or end <= start:
            return []
        return _until(islice(self._fires_after(start), limit), end)

    @property
    def nominal_interval_s(self) -> float | None:
        """The typical gap between fires (interval: the interval; cron: the smallest gap over the next
        50 fires from the anchor); None for once."""
        if self.kind == "interval":
            return self._every.total_seconds()
        if self.kind == "cron":
            return cron_nominal_interval(self._expr, self._zone, self.anchor)
        return None

    def _fires_after(self, after: datetime) -> Iterator[datetime]:
        """Fires strictly after `after`, strictly increasing, in UTC."""
        if self.kind == "once":
            if self.anchor > after:
                yield self.anchor
            return
        if self.kind == "interval":
            steps = max((after - self.anchor) // self._every + 1, 1)
            try:
                fire = self.anchor + steps * self._every
                while True:
                    yield fire
                    fire += self._every
            except OverflowError:
                return
        yield from cron_fires(self._expr, self._zone, after)


def parse_schedule(text: str, *, timezone: str = "UTC", now: datetime) -> Schedule:
    """Parse a schedule text (a cron expression, ``every``, ``once_after`` or ``once_at``) at `now`.

    Recurring schedules are anchored at `now` (to the second). Refuses recurring schedules with two
    fires closer than ``MIN_GAP_S``: for cron, over the next ``GAP_SAMPLE`` fires and over every
    DST change of the timezone in the coming year (all fires from three hours before to three
    hours after it), the places where wall-clock arithmetic could bunch fires together.
    """
    _require_aware(now, "now")
    zone = _zone(timezone)
    raw = text.strip()
    if not raw:
        raise ScheduleError(f"the schedule is empty; use one of {_FORMS}")
    created = now.astimezone(UTC).replace(microsecond=0)
    if match := _CRON_PREFIX.fullmatch(raw):
        return _parse_cron(match["body"] or "", timezone, created)
    if match := _EVERY_PREFIX.fullmatch(raw):
        every = _duration(match["body"] or "", form="every")
        if every.total_seconds() < MIN_GAP_S:
            raise ScheduleError(
                f"'every {_render_duration(every)}' fires more often than once every {MIN_GAP_S:.0f} s; "
                "use 'every 1m' or longer"
            )
        return Schedule("interval", f"every {_render_duration(every)}", timezone, created)
    if match := _ONCE_AFTER_PREFIX.fullmatch(raw):
        delay = _duration(match["body"] or "", form="once_after")
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
    canonical, _ = _cron_parts(body)
    schedule = Schedule("cron", f"cron {canonical}", timezone, created)
    fires = list(islice(cron_fires(schedule._expr, schedule._zone, created), GAP_SAMPLE))
    if not fires:
        raise ScheduleError(
            f"cron expression {schedule._expr!r} never fires in the next 50 years; "
            "check the day-of-month and month fields, e.g. '0 9 1 * *'"
        )
    _require_min_gap(schedule, fires)
    for start, end in offset_changes(schedule._zone, created):
        window = islice(cron_fires(schedule._expr, schedule._zone, start - _DST_MARGIN), _DST_WINDOW_FIRES)
        _require_min_gap(schedule, _until(window, end + _DST_MARGIN))
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
    return Schedule("once", f"once_at {_render_instant(instant)}", timezone, instant)


def _cron_parts(body: str) -> tuple[str, str]:
    """(canonical text, expression for cronsim) of a cron expression or macro."""
    fields = body.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        macro = fields[0].lower()
        if macro == "@reboot":
            raise ScheduleError(
                "'@reboot' has no fire time here; use 'once_after 1m' for a single run soon after creation"
            )
        if macro not in _MACROS:
            raise ScheduleError(
                f"unknown cron macro {fields[0]!r}; use one of {', '.join(_MACROS)} "
                "or five fields such as '0 0 * * *'"
            )
        return macro, _MACROS[macro]
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


def _until(fires: Iterator[datetime], end: datetime) -> list[datetime]:
    taken: list[datetime] = []
    for fire in fires:
        if fire > end:
            break
        taken.append(fire)
    return taken


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"unknown timezone {name!r}; use an IANA name such as 'Europe/Madrid', "
            "'America/New_York' or 'UTC'"
        ) from None


def _require_aware(moment: datetime, name: str) -> None:
    if moment.utcoffset() is None:
        raise ValueError(f"{name}={moment.isoformat()!r} has no timezone; pass an aware datetime")


def _duration(text: str, *, form: str) -> timedelta:
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
    if length > _MAX_DURATION:
        raise ScheduleError(
            f"{form} {body!r} is longer than {_MAX_DURATION.days} days; use a cron expression "
            "such as '0 0 1 1 *' for yearly runs"
        )
    return length


def _render_duration(length: timedelta) -> str:
    remaining = int(length.total_seconds())
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _render_instant(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _absolute_instant(text: str) -> datetime:
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
                f"once_at {body!r} is in the past; it is now {_render_instant(now)}, give a future time "
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
