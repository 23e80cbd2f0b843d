"""When a cron expression fires in a timezone: wall-time and real-time walks across UTC-offset changes.

Pure functions over cronsim; ``servers.cron.schedule_parse`` decides which schedules exist and checks them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from datetime import timezone as dt_timezone
from functools import lru_cache
from itertools import islice, pairwise

from cronsim import CronSim

GAP_SAMPLE = 50
"""Fires examined, from the creation time, for the minimum gap and the nominal interval."""

_DST_STEP = timedelta(hours=6)
_DST_HORIZON = timedelta(days=366)
_EPSILON = timedelta(microseconds=1)


def cron_fires(expr: str, zone: tzinfo, after: datetime) -> Iterator[datetime]:
    """Fires of `expr` in `zone` strictly after `after`, strictly increasing, in UTC."""
    if zone is UTC or _walks_wall_time(expr):
        fires = _wall_time_fires(expr, zone, after)
    else:
        fires = _real_time_fires(expr, zone, after)
    try:
        yield from fires
    except OverflowError:
        return


def _walks_wall_time(expr: str) -> bool:
    """Whether cronsim walks `expr` in wall time (Debian cron's rule: a fixed minute and hour)."""
    minute, hour = expr.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _wall_time_fires(expr: str, zone: tzinfo, after: datetime) -> Iterator[datetime]:
    last = after
    for local in CronSim(expr, after.astimezone(zone)):
        fire = local.astimezone(UTC)
        # Wall-time walking drops the fold of `after`: inside a repeated hour cronsim can answer
        # with the first occurrence of a wall time that already passed. Skip those.
        if fire > last:
            last = fire
            yield fire


def _real_time_fires(expr: str, zone: tzinfo, after: datetime) -> Iterator[datetime]:
    """Every instant whose wall time in `zone` matches `expr`, evaluated one UTC-offset period at a time.

    cronsim's own real-time walk skips fires around DST changes of zones whose offsets change by
    other than an hour (Australia/Lord_Howe, Pacific/Chatham). Within one period the offset is fixed,
    so a fixed-offset zone gives exact answers; a candidate past the period's end is recomputed from
    the change with the new offset.
    """
    offset = after.astimezone(zone).utcoffset()
    moment = after
    while offset is not None:
        candidate = next(CronSim(expr, moment.astimezone(dt_timezone(offset))), None)
        if candidate is None:
            return
        fire = candidate.astimezone(UTC)
        change = _first_offset_change(zone, moment, fire, offset)
        if change is None:
            yield fire
            moment = fire
        else:
            # Fires may fall on the change itself: search from just before it, with the new offset.
            moment, offset = change - _EPSILON, change.astimezone(zone).utcoffset()


def _first_offset_change(zone: tzinfo, start: datetime, end: datetime, offset: timedelta) -> datetime | None:
    """The first instant in (start, end] whose UTC offset in `zone` is not `offset`, or None."""
    previous = start
    while previous < end:
        probe = min(previous + _DST_STEP, end)
        if probe.astimezone(zone).utcoffset() != offset:
            low, high = previous, probe
            while high - low > _EPSILON:
                middle = low + (high - low) // 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            return high
        previous = probe
    return None


@lru_cache(maxsize=1024)
def cron_nominal_interval(expr: str, zone: tzinfo, anchor: datetime) -> float | None:
    fires = list(islice(cron_fires(expr, zone, anchor), GAP_SAMPLE))
    gaps = [(b - a).total_seconds() for a, b in pairwise(fires)]
    return min(gaps) if gaps else None


def offset_changes(zone: tzinfo, start: datetime) -> list[tuple[datetime, datetime]]:
    """Spans (at most ``_DST_STEP`` long) that each contain a UTC offset change of `zone` in the next year."""
    spans: list[tuple[datetime, datetime]] = []
    if zone is UTC:
        return spans
    moment, offset = start, start.astimezone(zone).utcoffset()
    while moment < start + _DST_HORIZON:
        following = moment + _DST_STEP
        following_offset = following.astimezone(zone).utcoffset()
        if following_offset != offset:
            spans.append((moment, following))
        moment, offset = following, following_offset
    return spans
