"""Action limits for autonomous cycles: a gap between cycle starts, quiet hours, and action caps.

An autonomous cycle is one heartbeat, tick or cron fire handled without the operator asking. Before
starting one, :meth:`ActionLimiter.can_start_cycle` says whether the cool-down, the quiet hours and
the hourly cap allow it now, and if not, from when. Inside a cycle every tool call first takes an
action from the :class:`Cycle`, which enforces the per-cycle cap and the rolling hourly cap shared by
all cycles; before each model call :meth:`Cycle.check_hour` stops the cycle once the hour is full.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from orchestrator.proactive.config import Limits, QuietHours

HOUR = timedelta(hours=1)
Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an autonomous cycle may not start now, and the earliest time it may."""

    axis: Literal["cooldown", "quiet_hours", "actions_per_hour"]
    reason: str
    retry_at: datetime


@dataclass(frozen=True, slots=True)
class LimitHit:
    """An action refused by a cap. ``first`` is True only the first time a cycle hits it: audit that one."""

    axis: Literal["actions_per_cycle", "actions_per_hour"]
    limit: int
    reason: str
    retry_at: datetime | None
    """When the hourly window has room again; None for the per-cycle cap (the next cycle has room)."""
    first: bool = True


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(
            f"{moment.isoformat()} has no time zone: the clock must return aware datetimes, "
            "e.g. datetime.now(UTC)"
        )
    return moment


def quiet_until(quiet: QuietHours, at: datetime) -> datetime | None:
    """The end of the quiet window that ``at`` falls in (UTC), or None when ``at`` is not quiet."""
    zone = quiet.zone
    local = _aware(at).astimezone(zone)
    start, end = quiet.start_time, quiet.end_time
    now = local.time()
    if start < end:
        inside, end_day = start <= now < end, local.date()
    else:  # the window wraps midnight
        inside = now >= start or now < end
        end_day = local.date() + timedelta(days=1) if now >= start else local.date()
    if not inside:
        return None
    return datetime.combine(end_day, end, tzinfo=zone).astimezone(UTC)


def _span(delta: timedelta) -> str:
    seconds = max(0, round(delta.total_seconds()))
    if seconds < 300:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class Cycle:
    """One autonomous cycle: counts its actions against its own cap and the limiter's hourly cap."""

    def __init__(self, limiter: ActionLimiter, started_at: datetime) -> None:
        self._limiter = limiter
        self.started_at = started_at
        self.actions = 0
        self._hit: LimitHit | None = None

    @property
    def stopped(self) -> LimitHit | None:
        """The cap this cycle hit, if any: every later action is refused too."""
        return self._hit

    def take_action(self) -> LimitHit | None:
        """Take one action (a tool call); None when allowed, the cap that refuses it otherwise."""
        if self._hit is not None:
            return replace(self._hit, first=False)
        limits = self._limiter.limits
        if self.actions >= limits.max_actions_per_cycle:
            self._hit = LimitHit(
                "actions_per_cycle",
                limits.max_actions_per_cycle,
                f"this cycle has used its {limits.max_actions_per_cycle} actions "
                "(autonomy.limits.max_actions_per_cycle): finish up; the next cycle starts afresh",
                None,
            )
            return self._hit
        hourly = self._limiter.take(self._limiter.now())
        if hourly is not None:
            self._hit = hourly
            return hourly
        self.actions += 1
        return None

    def check_hour(self) -> LimitHit | None:
        """The hourly cap when it already holds (checked before a model call), without taking an action."""
        if self._hit is not None:
            return self._hit
        self._hit = self._limiter.hour_full(self._limiter.now())
        return self._hit


class ActionLimiter:
    """Cool-down and quiet hours for cycle starts, and the rolling hourly action window."""

    def __init__(self, limits: Limits, *, clock: Clock) -> None:
        self.limits = limits
        self._clock = clock
        self._last_start: datetime | None = None
        # Only the newest max_actions_per_hour times matter: the cap is reached when the oldest of
        # them is less than an hour old, so the window never holds more.
        self._actions: deque[datetime] = deque(maxlen=limits.max_actions_per_hour)

    def now(self) -> datetime:
        return _aware(self._clock())

    @property
    def last_cycle_start(self) -> datetime | None:
        return self._last_start

    def can_start_cycle(self, now: datetime | None = None) -> Refusal | None:
        """None when a cycle may start at ``now``; otherwise why not and the earliest time it may.

        A full hourly window refuses too: a cycle that could take no action would only pay for a
        model call.
        """
        at = _aware(now) if now is not None else self.now()
        refusal = self._timing(at)
        if refusal is not None:
            return refusal
        hourly = self.hour_full(at)
        if hourly is None:
            return None
        assert hourly.retry_at is not None
        return Refusal("actions_per_hour", hourly.reason, hourly.retry_at)

    def _timing(self, at: datetime) -> Refusal | None:
        cooldown_end = (
            self._last_start + timedelta(seconds=self.limits.min_cycle_gap_s)
            if self._last_start is not None
            else None
        )
        quiet = self.limits.quiet_hours
        quiet_end = quiet_until(quiet, at) if quiet is not None else None
        if quiet_end is None and (cooldown_end is None or at >= cooldown_end):
            return None
        # The earliest moment past both: the cool-down may end inside quiet hours, and the other way round.
        retry = at
        for _ in range(3):
            if cooldown_end is not None and retry < cooldown_end:
                retry = cooldown_end
            later = quiet_until(quiet, retry) if quiet is not None else None
            if later is None:
                break
            retry = later
        if quiet_end is not None and quiet is not None:
            return Refusal(
                "quiet_hours",
                f"quiet hours {quiet.start}-{quiet.end} {quiet.timezone}: no autonomous cycle until "
                f"{retry.astimezone(quiet.zone):%H:%M} (autonomy.limits.quiet_hours)",
                retry,
            )
        assert self._last_start is not None
        return Refusal(
            "cooldown",
            f"the last cycle started {_span(at - self._last_start)} ago; cycles start at least "
            f"{self.limits.min_cycle_gap_s:g} s apart (autonomy.limits.min_cycle_gap_s): next in "
            f"{_span(retry - at)}",
            retry,
        )

    def start_cycle(self) -> Cycle:
        """Begin a cycle now (call :meth:`can_start_cycle` first); its start begins the next cool-down."""
        started = self.now()
        self._last_start = started
        return Cycle(self, started)

    def hour_count(self, now: datetime | None = None) -> int:
        """Actions taken in the hour up to ``now``."""
        at = _aware(now) if now is not None else self.now()
        return sum(1 for taken in self._actions if at - HOUR < taken <= at)

    def hour_full(self, now: datetime) -> LimitHit | None:
        """The hourly cap when the last hour already holds ``max_actions_per_hour`` actions."""
        while self._actions and self._actions[0] <= now - HOUR:
            self._actions.popleft()
        cap = self.limits.max_actions_per_hour
        if len(self._actions) < cap:
            return None
        retry = self._actions[0] + HOUR
        return LimitHit(
            "actions_per_hour",
            cap,
            f"{cap} autonomous actions in the last hour (autonomy.limits.max_actions_per_hour): "
            f"the next is allowed in {_span(retry - now)}",
            retry,
        )

    def take(self, now: datetime) -> LimitHit | None:
        """Record one action in the hourly window, or refuse it when the window is full."""
        hit = self.hour_full(now)
        if hit is None:
            self._actions.append(now)
        return hit

    def restore(self, taken: list[datetime]) -> None:
        """Replace the hourly window with actions taken earlier (read back from the ledger at start)."""
        self._actions.clear()
        self._actions.extend(sorted(_aware(at) for at in taken))
