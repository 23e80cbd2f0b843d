"""Cycle starts (cool-down, quiet hours) and action caps (per cycle, per rolling hour), on a manual clock."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.proactive.config import Limits, QuietHours
from orchestrator.proactive.limits import ActionLimiter, LimitHit, Refusal, quiet_until

START = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def limiter(clock: Clock, **limits: object) -> ActionLimiter:
    return ActionLimiter(Limits.model_validate(limits), clock=clock)


# -- cool-down -----------------------------------------------------------------------------------


def test_the_first_cycle_may_start_at_once() -> None:
    assert limiter(Clock()).can_start_cycle() is None


def test_the_cooldown_counts_from_the_previous_cycle_start() -> None:
    clock = Clock()
    limits = limiter(clock, min_cycle_gap_s=300)
    limits.start_cycle()
    clock.advance(seconds=200)  # the cycle worked for 200 s; the gap still runs from its start
    refusal = limits.can_start_cycle()
    assert refusal == Refusal(
        "cooldown",
        "the last cycle started 200 s ago; cycles start at least 300 s apart "
        "(autonomy.limits.min_cycle_gap_s): next in 100 s",
        START + timedelta(seconds=300),
    )
    clock.advance(seconds=99)
    assert limits.can_start_cycle() is not None
    clock.advance(seconds=1)
    assert limits.can_start_cycle() is None
    assert limits.last_cycle_start == START


def test_can_start_cycle_answers_for_a_given_time_too() -> None:
    clock = Clock()
    limits = limiter(clock, min_cycle_gap_s=600)
    limits.start_cycle()
    assert limits.can_start_cycle(START + timedelta(minutes=10)) is None
    refused = limits.can_start_cycle(START + timedelta(minutes=4))
    assert refused is not None
    assert (refused.axis, refused.retry_at) == ("cooldown", START + timedelta(minutes=10))


def test_no_gap_means_cycles_may_follow_each_other_directly() -> None:
    clock = Clock()
    limits = limiter(clock, min_cycle_gap_s=0)
    limits.start_cycle()
    assert limits.can_start_cycle() is None


# -- quiet hours ---------------------------------------------------------------------------------

OVERNIGHT_UTC = QuietHours(start="22:00", end="07:00", timezone="UTC")


@pytest.mark.parametrize(
    ("at", "until"),
    [
        ("2026-11-20T21:59:59", None),
        ("2026-11-20T22:00:00", "2026-11-21T07:00:00"),
        ("2026-11-20T23:59:00", "2026-11-21T07:00:00"),
        ("2026-11-21T00:00:00", "2026-11-21T07:00:00"),
        ("2026-11-21T06:59:59", "2026-11-21T07:00:00"),
        ("2026-11-21T07:00:00", None),
        ("2026-11-21T12:00:00", None),
    ],
)
def test_an_overnight_window_wraps_midnight(at: str, until: str | None) -> None:
    assert quiet_until(OVERNIGHT_UTC, utc(at)) == (utc(until) if until else None)


@pytest.mark.parametrize(
    ("at", "until"),
    [
        ("2026-11-20T12:59:00", None),
        ("2026-11-20T13:00:00", "2026-11-20T14:30:00"),
        ("2026-11-20T14:29:00", "2026-11-20T14:30:00"),
        ("2026-11-20T14:30:00", None),
    ],
)
def test_a_daytime_window_does_not_wrap(at: str, until: str | None) -> None:
    lunch = QuietHours(start="13:00", end="14:30", timezone="UTC")
    assert quiet_until(lunch, utc(at)) == (utc(until) if until else None)


@pytest.mark.parametrize(
    ("zone", "at", "until"),
    [
        # Berlin in winter is UTC+1: 22:00-07:00 local is 21:00-06:00 UTC.
        ("Europe/Berlin", "2026-11-20T20:59:00", None),
        ("Europe/Berlin", "2026-11-20T21:30:00", "2026-11-21T06:00:00"),
        ("Europe/Berlin", "2026-11-20T23:30:00", "2026-11-21T06:00:00"),
        ("Europe/Berlin", "2026-11-21T06:00:00", None),
        # In summer it is UTC+2.
        ("Europe/Berlin", "2026-07-01T20:30:00", "2026-07-02T05:00:00"),
        ("Europe/Berlin", "2026-07-01T19:59:00", None),
        # The night clocks go forward (29 March 2026): 22:30 CET, the window ends at 07:00 CEST.
        ("Europe/Berlin", "2026-03-28T21:30:00", "2026-03-29T05:00:00"),
        # New York in November is UTC-5: 22:00 local is 03:00 UTC the next day.
        ("America/New_York", "2026-11-21T03:00:00", "2026-11-21T12:00:00"),
        ("America/New_York", "2026-11-21T02:59:00", None),
        ("America/New_York", "2026-11-21T11:59:00", "2026-11-21T12:00:00"),
    ],
)
def test_quiet_hours_follow_their_own_time_zone(zone: str, at: str, until: str | None) -> None:
    quiet = QuietHours(start="22:00", end="07:00", timezone=zone)
    assert quiet_until(quiet, utc(at)) == (utc(until) if until else None)


def test_no_cycle_starts_in_quiet_hours_and_the_refusal_says_until_when() -> None:
    berlin = QuietHours(start="22:00", end="07:00", timezone="Europe/Berlin")
    clock = Clock(utc("2026-11-20T22:15:00"))  # 23:15 in Berlin
    refusal = limiter(clock, quiet_hours=berlin).can_start_cycle()
    assert refusal == Refusal(
        "quiet_hours",
        "quiet hours 22:00-07:00 Europe/Berlin: no autonomous cycle until 07:00 "
        "(autonomy.limits.quiet_hours)",
        utc("2026-11-21T06:00:00"),
    )


def test_a_cooldown_that_ends_inside_quiet_hours_waits_for_their_end() -> None:
    clock = Clock(utc("2026-11-20T21:58:00"))
    limits = limiter(clock, min_cycle_gap_s=300, quiet_hours=OVERNIGHT_UTC)
    limits.start_cycle()
    clock.advance(minutes=1)
    refusal = limits.can_start_cycle()
    assert refusal is not None
    assert (refusal.axis, refusal.retry_at) == ("cooldown", utc("2026-11-21T07:00:00"))
    clock.advance(minutes=10)
    refusal = limits.can_start_cycle()
    assert refusal is not None
    assert (refusal.axis, refusal.retry_at) == ("quiet_hours", utc("2026-11-21T07:00:00"))


def test_a_cooldown_longer_than_the_night_is_not_cut_short_by_its_end() -> None:
    clock = Clock(utc("2026-11-20T20:00:00"))
    limits = limiter(clock, min_cycle_gap_s=12 * 3600, quiet_hours=OVERNIGHT_UTC)
    limits.start_cycle()
    clock.now = utc("2026-11-20T23:00:00")
    refusal = limits.can_start_cycle()
    assert refusal is not None
    assert (refusal.axis, refusal.retry_at) == ("quiet_hours", utc("2026-11-21T08:00:00"))


def test_a_naive_clock_is_refused_with_the_fix() -> None:
    limits = ActionLimiter(Limits(), clock=lambda: datetime(2026, 11, 20, 12, 0))
    with pytest.raises(ValueError, match=r"has no time zone: the clock must return aware datetimes"):
        limits.can_start_cycle()


# -- action caps ---------------------------------------------------------------------------------


def test_a_cycle_stops_at_its_action_cap_and_reports_the_hit_once() -> None:
    clock = Clock()
    limits = limiter(clock, max_actions_per_cycle=3)
    cycle = limits.start_cycle()
    assert [cycle.take_action() for _ in range(3)] == [None, None, None]
    hit = cycle.take_action()
    assert hit == LimitHit(
        "actions_per_cycle",
        3,
        "this cycle has used its 3 actions (autonomy.limits.max_actions_per_cycle): finish up; "
        "the next cycle starts afresh",
        None,
        first=True,
    )
    again = [cycle.take_action() for _ in range(2)]
    assert [(later.axis, later.first) for later in again if later] == [("actions_per_cycle", False)] * 2
    assert cycle.actions == 3
    assert cycle.stopped == hit
    assert limits.start_cycle().take_action() is None


def test_the_hourly_cap_spans_cycles_and_says_when_room_returns() -> None:
    clock = Clock()
    limits = limiter(clock, max_actions_per_hour=5, min_cycle_gap_s=0)
    first = limits.start_cycle()
    for _ in range(3):
        assert first.take_action() is None
        clock.advance(minutes=1)
    second = limits.start_cycle()
    assert [second.take_action(), second.take_action()] == [None, None]
    assert limits.hour_count() == 5
    hit = second.take_action()
    assert hit is not None
    assert (hit.axis, hit.limit, hit.first, hit.retry_at) == (
        "actions_per_hour",
        5,
        True,
        START + timedelta(hours=1),
    )
    assert hit.reason == (
        "5 autonomous actions in the last hour (autonomy.limits.max_actions_per_hour): "
        "the next is allowed in 57 min"
    )
    clock.now = START + timedelta(hours=1)
    later = second.take_action()  # a stopped cycle stays stopped, even once the window has room
    assert later is not None
    assert (later.axis, later.first) == ("actions_per_hour", False)
    assert limits.hour_count() == 4
    assert limits.start_cycle().take_action() is None


def test_the_hourly_window_rolls() -> None:
    clock = Clock()
    limits = limiter(clock, max_actions_per_hour=3, min_cycle_gap_s=0)
    cycle = limits.start_cycle()
    for _ in range(3):
        assert cycle.take_action() is None
        clock.advance(minutes=20)
    assert limits.hour_count(START + timedelta(minutes=59)) == 3
    assert limits.hour_count(START + timedelta(minutes=60)) == 2
    assert limits.hour_count(START + timedelta(minutes=99)) == 1
    assert limits.hour_count(START + timedelta(hours=3)) == 0


@pytest.mark.parametrize("seed", range(25))
def test_no_rolling_hour_ever_holds_more_actions_than_the_cap(seed: int) -> None:
    rng = random.Random(seed)
    cap = rng.randint(1, 8)
    clock = Clock()
    limits = limiter(
        clock, max_actions_per_hour=cap, max_actions_per_cycle=rng.randint(1, 6), min_cycle_gap_s=0
    )
    allowed: list[datetime] = []
    cycle = limits.start_cycle()
    for _ in range(400):
        clock.advance(seconds=rng.choice([0, 5, 60, 300, 900, 1800]))
        if rng.random() < 0.2:
            cycle = limits.start_cycle()
        hit = cycle.take_action()
        if hit is None:
            allowed.append(clock.now)
            continue
        if hit.axis == "actions_per_hour" and hit.first:
            assert hit.retry_at is not None
            assert hit.retry_at > clock.now
            assert limits.hour_count() == cap
            assert limits.hour_count(hit.retry_at) < cap
    assert allowed
    for end in allowed:
        assert sum(end - timedelta(hours=1) < at <= end for at in allowed) <= cap


def test_a_full_hour_stops_a_cycle_before_its_next_model_call_and_refuses_new_cycles() -> None:
    clock = Clock()
    limits = limiter(clock, max_actions_per_hour=2, min_cycle_gap_s=0)
    cycle = limits.start_cycle()
    assert cycle.check_hour() is None
    assert cycle.take_action() is None
    assert cycle.take_action() is None
    held = cycle.check_hour()
    assert held is not None
    assert held.axis == "actions_per_hour"
    assert cycle.stopped == held
    refusal = limits.can_start_cycle()
    assert refusal is not None
    assert (refusal.axis, refusal.retry_at) == ("actions_per_hour", START + timedelta(hours=1))
    clock.advance(hours=1)
    assert limits.can_start_cycle() is None


def test_the_hourly_window_is_restored_from_actions_taken_before_a_restart() -> None:
    clock = Clock()
    limits = limiter(clock, max_actions_per_hour=3)
    limits.restore([START - timedelta(minutes=m) for m in (50, 10, 70, 5)])
    assert limits.hour_count() == 3
    refusal = limits.can_start_cycle()
    assert refusal is not None
    assert refusal.retry_at == START + timedelta(minutes=10)
