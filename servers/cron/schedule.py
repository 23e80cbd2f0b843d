"""A schedule and its fire times. Pure: the caller passes the time.

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

Texts become schedules in :mod:`servers.cron.schedule_parse`; the pieces of a text (timezones,
cron expressions, durations, instants) are checked and rendered in :mod:`servers.cron.schedule_forms`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from itertools import islice
from typing import Literal

from servers.cron.cron_walk import cron_fires, cron_nominal_interval
from servers.cron.schedule_forms import (
    ScheduleError,
    absolute_instant,
    cron_parts,
    parse_duration,
    render_duration,
    render_instant,
    require_aware,
    timezone_of,
)

ScheduleKind = Literal["cron", "interval", "once"]


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
        zone = timezone_of(self.timezone)
        if self.anchor.utcoffset() is None:
            raise ScheduleError(
                f"schedule anchor {self.anchor.isoformat()!r} has no timezone; "
                "pass an aware datetime such as datetime.now(UTC)"
            )
        anchor = self.anchor.astimezone(UTC)
        expr, every = "", timedelta(0)
        if self.kind == "cron":
            body, expr = cron_parts(self.spec.removeprefix("cron "))
            canonical = f"cron {body}"
        elif self.kind == "interval":
            every = parse_duration(self.spec.removeprefix("every "), form="every")
            canonical = f"every {render_duration(every)}"
        elif self.kind == "once":
            instant = absolute_instant(self.spec.removeprefix("once_at "))
            canonical = f"once_at {render_instant(instant)}"
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
    def zone(self) -> tzinfo:
        """The timezone cron expressions are evaluated in."""
        return self._zone

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after `after` (aware datetime, any zone) as an aware UTC datetime;
        None when a once schedule is past (or a cron expression has no fire in the next 50 years)."""
        require_aware(after, "after")
        return next(self.fires_after(after), None)

    def slots_between(self, start: datetime, end: datetime, limit: int) -> list[datetime]:
        """Fires in (start, end], oldest first, at most `limit`."""
        require_aware(start, "start")
        require_aware(end, "end")
        if limit <= 0 or end <= start:
            return []
        return fires_until(islice(self.fires_after(start), limit), end)

    @property
    def nominal_interval_s(self) -> float | None:
        """The typical gap between fires (interval: the interval; cron: the smallest gap over the next
        50 fires from the anchor); None for once."""
        if self.kind == "interval":
            return self._every.total_seconds()
        if self.kind == "cron":
            return cron_nominal_interval(self._expr, self._zone, self.anchor)
        return None

    def fires_after(self, after: datetime) -> Iterator[datetime]:
        """Fires strictly after `after`, strictly increasing, in UTC (`after` must be aware)."""
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


def fires_until(fires: Iterator[datetime], end: datetime) -> list[datetime]:
    """The fires of an increasing iterator up to and including `end`."""
    taken: list[datetime] = []
    for fire in fires:
        if fire > end:
            break
        taken.append(fire)
    return taken
