"""Schedule parsing and fire-time arithmetic, with DST in several timezones."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import cast
from zoneinfo import ZoneInfo

import pytest

from servers.cron.schedule import Schedule, ScheduleKind
from servers.cron.schedule_forms import ScheduleError
from servers.cron.schedule_parse import MIN_GAP_S, parse_schedule

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


NOW = utc(2026, 3, 1, 12)  # 13:00 in Berlin, 07:00 in New York


def parse(text: str, timezone: str = "UTC", now: datetime = NOW) -> Schedule:
    return parse_schedule(text, timezone=timezone, now=now)


def local_times(slots: list[datetime], timezone: str) -> list[str]:
    return [slot.astimezone(ZoneInfo(timezone)).strftime("%d %H:%M%z") for slot in slots]


VALID = [
    ("*/5 * * * *", "UTC", "cron", "cron */5 * * * *", NOW),
    ("  CRON 0 9 * * mon-fri  ", BERLIN, "cron", "cron 0 9 * * mon-fri", NOW),
    ("0   9 * *   MON-FRI", BERLIN, "cron", "cron 0 9 * * MON-FRI", NOW),
    ("@daily", "UTC", "cron", "cron @daily", NOW),
    ("cron @HOURLY", "UTC", "cron", "cron @hourly", NOW),
    ("every 30m", "UTC", "interval", "every 30m", NOW),
    ("Every 2H", "UTC", "interval", "every 2h", NOW),
    ("every 90s", "UTC", "interval", "every 1m30s", NOW),
    ("every 1d", BERLIN, "interval", "every 1d", NOW),
    ("every 1h30m", "UTC", "interval", "every 1h30m", NOW),
    ("every 1h 30m", "UTC", "interval", "every 1h30m", NOW),
    ("every 90m", "UTC", "interval", "every 1h30m", NOW),
    ("once_after_2h", "UTC", "once", "once_at 2026-03-01T14:00:00Z", utc(2026, 3, 1, 14)),
    ("once_after 30m", BERLIN, "once", "once_at 2026-03-01T12:30:00Z", utc(2026, 3, 1, 12, 30)),
    ("ONCE_AFTER_90s", "UTC", "once", "once_at 2026-03-01T12:01:30Z", utc(2026, 3, 1, 12, 1, 30)),
    ("once_at 09:00", BERLIN, "once", "once_at 2026-03-02T08:00:00Z", utc(2026, 3, 2, 8)),
    ("once_at 14:00", BERLIN, "once", "once_at 2026-03-01T13:00:00Z", utc(2026, 3, 1, 13)),
    ("once_at 2026-12-01 09:00", BERLIN, "once", "once_at 2026-12-01T08:00:00Z", utc(2026, 12, 1, 8)),
    ("once_at 2026-12-01T09:00:00", NEW_YORK, "once", "once_at 2026-12-01T14:00:00Z", utc(2026, 12, 1, 14)),
    (
        "once_at 2026-12-01T09:00:00+01:00",
        NEW_YORK,
        "once",
        "once_at 2026-12-01T08:00:00Z",
        utc(2026, 12, 1, 8),
    ),
    ("once_at 2026-12-01t09:00:00z", BERLIN, "once", "once_at 2026-12-01T09:00:00Z", utc(2026, 12, 1, 9)),
]


@pytest.mark.parametrize(("text", "timezone", "kind", "spec", "anchor"), VALID)
def test_valid_forms_parse_to_their_canonical_spec(
    text: str, timezone: str, kind: str, spec: str, anchor: datetime
) -> None:
    schedule = parse(text, timezone)
    assert (schedule.kind, schedule.spec, schedule.timezone, schedule.anchor) == (
        kind,
        spec,
        timezone,
        anchor,
    )
    assert schedule.anchor.tzinfo is UTC
    assert schedule.recurring is (kind != "once")


@pytest.mark.parametrize(("text", "timezone", "kind", "spec", "anchor"), VALID)
def test_the_canonical_spec_parses_back_unchanged_and_rebuilds_from_stored_fields(
    text: str, timezone: str, kind: str, spec: str, anchor: datetime
) -> None:
    schedule = parse(text, timezone)
    assert parse(schedule.spec, timezone) == schedule
    assert Schedule(schedule.kind, schedule.spec, schedule.timezone, schedule.anchor) == schedule


INVALID = [
    ("", ["empty", "'every 30m'"]),
    ("   ", ["empty"]),
    ("tomorrow", ["unrecognised schedule 'tomorrow'", "'once_after 2h'"]),
    ("0 0 * * * *", ["6 fields", "seconds and year fields are not supported", "'*/5 * * * *'"]),
    ("0 0 * * * * 2026", ["7 fields", "seconds and year fields are not supported"]),
    ("*/5 * * *", ["4 fields", "expected five", "'*/5 * * * *'"]),
    ("cron", ["0 fields", "expected five"]),
    ("61 * * * *", ["'61 * * * *' is invalid (bad minute field)", "minute (0-59)", "'0 9 * * mon-fri'"]),
    ("0 24 * * *", ["bad hour field", "hour (0-23)"]),
    ("0 9 * * funday", ["bad day-of-week field", "sun-sat"]),
    ("0 0 30 2 *", ["bad day-of-month field"]),
    ("@reboot", ["'@reboot' has no fire time", "'once_after 1m'"]),
    ("@sometimes", ["unknown cron macro '@sometimes'", "@daily"]),
    ("every", ["every needs a duration", "'every 30m'"]),
    ("every 30 minutes", ["every needs a duration", "'1h30m'"]),
    ("every 0m", ["is zero", "positive duration"]),
    ("every 30s", ["'every 30s' fires more often than once every 60 s", "'every 1m'"]),
    ("every 59s", ["fires more often than once every 60 s"]),
    ("every 3651d", ["longer than 3650 days", "'0 0 1 1 *'"]),
    ("every 999999999999d", ["longer than 3650 days"]),
    ("once_after", ["once_after needs a duration", "'once_after 30m'"]),
    ("once_after 0s", ["is zero"]),
    ("once_after_soon", ["once_after needs a duration"]),
    ("once_at", ["once_at needs a time", "'once_at 09:00'"]),
    ("once_at 25:00", ["'25:00' is not a time of day", "HH:MM"]),
    ("once_at noon", ["once_at needs a time (got 'noon')"]),
    ("once_at 2026-12-01", ["once_at needs a time", "'once_at 2026-12-01 09:00'"]),
    ("once_at 2026-13-01 09:00", ["not a valid date and time", "'once_at 2026-12-01 09:00'"]),
    (
        "once_at 2026-02-01 09:00",
        ["'2026-02-01 09:00' is in the past", "2026-03-01T12:00:00Z", "once_after 10m"],
    ),
    ("once_at 2026-03-01T12:00:00Z", ["is in the past"]),
    ("once_at 2026-03-01T12:30:00+01:00", ["is in the past"]),
]


@pytest.mark.parametrize(("text", "fragments"), INVALID)
def test_invalid_forms_are_refused_with_the_problem_and_a_valid_example(
    text: str, fragments: list[str]
) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse(text)
    message = str(caught.value)
    missing = [fragment for fragment in fragments if fragment not in message]
    assert missing == [], message


@pytest.mark.parametrize(
    "timezone", ["Mars/Olympus_Mons", "europe/berlin", "Europe/Berlin ", "", "../etc/passwd"]
)
def test_an_unknown_timezone_is_named_and_an_iana_example_given(timezone: str) -> None:
    with pytest.raises(ScheduleError, match="unknown timezone") as caught:
        parse("0 9 * * *", timezone)
    assert repr(timezone) in str(caught.value)
    assert "'Europe/Madrid'" in str(caught.value)


def test_a_schedule_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unrecognised"):
        parse("whenever")


def test_the_minimum_gap_is_sixty_seconds_and_every_minute_is_allowed() -> None:
    assert MIN_GAP_S == 60.0
    assert parse("every 60s").spec == "every 1m"
    every_minute = parse("* * * * *", BERLIN)
    assert every_minute.nominal_interval_s == 60.0
    fall_back_night = every_minute.slots_between(utc(2026, 10, 24, 23), utc(2026, 10, 25, 3), 1000)
    assert len(fall_back_night) == 240
    assert {later - earlier for earlier, later in pairwise(fall_back_night)} == {timedelta(seconds=60)}


def test_recurring_schedules_are_anchored_at_creation_to_the_second() -> None:
    created = datetime(2026, 3, 1, 12, 0, 5, 987654, tzinfo=UTC)
    assert parse("every 5m", now=created).anchor == utc(2026, 3, 1, 12, 0, 5)
    assert parse("*/5 * * * *", now=created).anchor == utc(2026, 3, 1, 12, 0, 5)


def test_once_after_rounds_up_to_the_second_so_it_never_fires_before_the_delay() -> None:
    created = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
    schedule = parse("once_after 10m", now=created)
    assert schedule.anchor == utc(2026, 3, 1, 12, 10, 1)
    assert schedule.spec == "once_at 2026-03-01T12:10:01Z"


def test_a_one_shot_fires_once_and_then_never_again() -> None:
    schedule = parse("once_at 2026-12-01T09:00:00Z")
    assert schedule.next_after(NOW) == utc(2026, 12, 1, 9)
    assert schedule.next_after(utc(2026, 12, 1, 9)) is None
    assert schedule.nominal_interval_s is None


def test_once_at_a_time_of_day_means_the_next_one_today_or_tomorrow() -> None:
    before = parse("once_at 14:00", BERLIN, now=utc(2026, 3, 1, 12, 59, 59))
    exactly = parse("once_at 14:00", BERLIN, now=utc(2026, 3, 1, 13))
    assert before.anchor == utc(2026, 3, 1, 13)
    assert exactly.anchor == utc(2026, 3, 2, 13)


def test_once_at_a_wall_time_skipped_by_spring_forward_moves_forward_by_the_gap() -> None:
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist; 03:30 CEST does.
    by_time = parse("once_at 02:30", BERLIN, now=utc(2026, 3, 28, 12))
    by_date = parse("once_at 2026-03-29 02:30", BERLIN, now=utc(2026, 3, 28, 12))
    assert by_time.anchor == by_date.anchor == utc(2026, 3, 29, 1, 30)
    assert local_times([by_time.anchor], BERLIN) == ["29 03:30+0200"]


def test_once_at_an_ambiguous_wall_time_takes_the_first_occurrence_unless_it_passed() -> None:
    # Berlin, 25 October 2026: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice.
    day_before = parse("once_at 02:30", BERLIN, now=utc(2026, 10, 24, 12))
    explicit = parse("once_at 2026-10-25 02:30", BERLIN, now=utc(2026, 10, 24, 12))
    between = parse("once_at 02:30", BERLIN, now=utc(2026, 10, 25, 0, 45))
    after_both = parse("once_at 02:30", BERLIN, now=utc(2026, 10, 25, 1, 45))
    assert day_before.anchor == explicit.anchor == utc(2026, 10, 25, 0, 30)
    assert between.anchor == utc(2026, 10, 25, 1, 30)
    assert after_both.anchor == utc(2026, 10, 26, 1, 30)


def test_naive_datetimes_are_refused() -> None:
    schedule = parse("every 5m")
    naive = datetime(2026, 3, 1, 12)
    with pytest.raises(ValueError, match=r"after=.* has no timezone"):
        schedule.next_after(naive)
    with pytest.raises(ValueError, match=r"start=.* has no timezone"):
        schedule.slots_between(naive, NOW, 5)
    with pytest.raises(ValueError, match=r"end=.* has no timezone"):
        schedule.slots_between(NOW, naive, 5)
    with pytest.raises(ValueError, match=r"now=.* has no timezone"):
        parse_schedule("every 5m", now=naive)


@pytest.mark.parametrize(
    ("kind", "spec", "anchor", "fragment"),
    [
        ("interval", "every 90m", NOW, "expected 'every 1h30m'"),
        ("cron", "*/5 * * * *", NOW, "expected 'cron */5 * * * *'"),
        ("cron", "every 5m", NOW, "has 2 fields"),
        ("interval", "every 5m", datetime(2026, 3, 1, 12), "has no timezone"),
        ("once", "once_at 2026-12-01T09:00:00Z", NOW, "disagree"),
        ("once", "once_at tomorrow", NOW, "not an ISO 8601 timestamp with an offset"),
        (
            "once",
            "once_at 2026-12-01T09:00:00",
            utc(2026, 12, 1, 9),
            "not an ISO 8601 timestamp with an offset",
        ),
        ("weekly", "every 7d", NOW, "unknown schedule kind 'weekly'"),
    ],
)
def test_stored_fields_that_do_not_describe_a_schedule_are_refused(
    kind: str, spec: str, anchor: datetime, fragment: str
) -> None:
    with pytest.raises(ScheduleError) as caught:
        Schedule(cast(ScheduleKind, kind), spec, "UTC", anchor)
    assert fragment in str(caught.value)


def test_an_anchor_in_another_zone_is_stored_in_utc() -> None:
    anchor = datetime(2026, 3, 1, 13, tzinfo=ZoneInfo(BERLIN))
    schedule = Schedule("interval", "every 5m", BERLIN, anchor)
    assert schedule.anchor == NOW
    assert schedule.anchor.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "timezone", "nominal"),
    [
        ("every 30m", "UTC", 1800.0),
        ("every 1h30m", BERLIN, 5400.0),
        ("*/5 * * * *", "UTC", 300.0),
        ("0 9 * * mon-fri", BERLIN, 86400.0),
        ("@weekly", "UTC", 604800.0),
        ("15,45 * * * *", "UTC", 1800.0),
        ("once_after 1h", "UTC", None),
    ],
)
def test_nominal_interval_is_the_smallest_gap(text: str, timezone: str, nominal: float | None) -> None:
    assert parse(text, timezone).nominal_interval_s == nominal


def test_the_nominal_interval_of_cron_counts_dst_days_from_the_anchor() -> None:
    # The next 50 fires from 1 March include the 23-hour spring-forward day (02:30 -> 03:00 CEST).
    assert parse("30 2 * * *", BERLIN).nominal_interval_s == 23.5 * 3600


def test_cron_expressions_run_in_their_timezone() -> None:
    schedule = parse("0 9 * * *", NEW_YORK)
    assert schedule.next_after(NOW) == utc(2026, 3, 1, 14)
    assert parse("0 9 * * *").next_after(NOW) == utc(2026, 3, 2, 9)


# --- DST -------------------------------------------------------------------------------------


def test_berlin_spring_forward_daily_fires_once_at_the_first_minute_that_exists() -> None:
    slots = parse("30 2 * * *", BERLIN).slots_between(utc(2026, 3, 28, 12), utc(2026, 3, 30, 12), 10)
    assert local_times(slots, BERLIN) == ["29 03:00+0200", "30 02:30+0200"]
    assert slots == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]


def test_berlin_fall_back_daily_fires_exactly_once() -> None:
    slots = parse("30 2 * * *", BERLIN).slots_between(utc(2026, 10, 24, 12), utc(2026, 10, 26, 12), 10)
    assert local_times(slots, BERLIN) == ["25 02:30+0200", "26 02:30+0100"]


def test_berlin_fall_back_day_has_twenty_five_distinct_hourly_fires() -> None:
    # The local day 25 October 2026 runs from 22:00 UTC on the 24th to 23:00 UTC on the 25th.
    slots = parse("0 * * * *", BERLIN).slots_between(
        utc(2026, 10, 24, 21, 59), utc(2026, 10, 25, 22, 59), 100
    )
    assert len(slots) == len(set(slots)) == 25
    assert {later - earlier for earlier, later in pairwise(slots)} == {timedelta(hours=1)}
    hours = [slot.astimezone(ZoneInfo(BERLIN)).hour for slot in slots]
    assert hours == [0, 1, 2, 2, *range(3, 24)]


def test_new_york_spring_forward_and_fall_back() -> None:
    spring = parse("30 2 * * *", NEW_YORK).slots_between(utc(2026, 3, 7, 12), utc(2026, 3, 9, 12), 10)
    fall = parse("30 1 * * *", NEW_YORK).slots_between(utc(2026, 10, 31, 12), utc(2026, 11, 2, 12), 10)
    assert local_times(spring, NEW_YORK) == ["08 03:00-0400", "09 02:30-0400"]
    assert local_times(fall, NEW_YORK) == ["01 01:30-0400", "02 01:30-0500"]


def test_new_york_weekday_mornings_stay_at_nine_local_across_the_change() -> None:
    slots = parse("0 9 * * mon-fri", NEW_YORK).slots_between(utc(2026, 3, 6), utc(2026, 3, 10), 10)
    assert slots == [utc(2026, 3, 6, 14), utc(2026, 3, 9, 13)]


def test_lord_howe_half_hour_fall_back() -> None:
    # 5 April 2026: 02:00 +11:00 (15:00 UTC) falls back to 01:30 +10:30, repeating 01:30-02:00.
    daily = parse("45 1 * * *", LORD_HOWE).slots_between(utc(2026, 4, 3, 12), utc(2026, 4, 5, 12), 10)
    assert local_times(daily, LORD_HOWE) == ["04 01:45+1100", "05 01:45+1100"]
    quarters = parse("*/15 * * * *", LORD_HOWE).slots_between(
        utc(2026, 4, 4, 14), utc(2026, 4, 4, 15, 30), 10
    )
    assert local_times(quarters, LORD_HOWE) == [
        "05 01:15+1100",
        "05 01:30+1100",
        "05 01:45+1100",
        "05 01:30+1030",
        "05 01:45+1030",
        "05 02:00+1030",
    ]
    assert {later - earlier for earlier, later in pairwise(quarters)} == {timedelta(minutes=15)}


def test_lord_howe_every_minute_of_a_wildcard_hour_fires_across_the_change() -> None:
    # Wall hour 2 on the fall-back day runs 15:30-16:29 UTC: sixty fires, none skipped.
    slots = parse("* 2 * * *", LORD_HOWE).slots_between(utc(2026, 4, 4, 14), utc(2026, 4, 4, 17), 100)
    assert slots == [utc(2026, 4, 4, 15, 30) + timedelta(minutes=minute) for minute in range(60)]


def test_lord_howe_half_hour_spring_forward() -> None:
    # 4 October 2026: 02:00 +10:30 (15:30 UTC) jumps to 02:30 +11:00; 02:15 does not exist.
    slots = parse("15 2 * * *", LORD_HOWE).slots_between(utc(2026, 10, 2, 12), utc(2026, 10, 4, 12), 10)
    assert local_times(slots, LORD_HOWE) == ["03 02:15+1030", "04 02:30+1100"]


def test_intervals_ignore_dst() -> None:
    schedule = parse("every 1d", BERLIN, now=utc(2026, 3, 28, 12))
    slots = schedule.slots_between(schedule.anchor, utc(2026, 3, 31, 12), 10)
    assert slots == [utc(2026, 3, 29, 12), utc(2026, 3, 30, 12), utc(2026, 3, 31, 12)]
    assert local_times(slots, BERLIN) == ["29 14:00+0200", "30 14:00+0200", "31 14:00+0200"]


# --- walking slots ---------------------------------------------------------------------------

WALK_ZONES = [BERLIN, NEW_YORK, LORD_HOWE, "Asia/Kolkata", "UTC"]
WALK_EXPRESSIONS = [
    "* * * * *",
    "*/7 * * * *",
    "0 * * * *",
    "15,45 * * * *",
    "30 2 * * *",
    "0,30 1,2 * * *",
    "*/20 2 * * *",
    "5 */3 * * *",
    "every 25m",
]
DST_CHANGES = [utc(2026, 3, 29, 1), utc(2026, 10, 25, 1), utc(2026, 3, 8, 7), utc(2026, 11, 1, 6)]
DST_CHANGES += [utc(2026, 4, 4, 15), utc(2026, 10, 3, 15, 30)]


def random_moments(rng: random.Random, count: int) -> list[datetime]:
    moments = []
    for _ in range(count):
        if rng.random() < 0.5:
            base, spread = rng.choice(DST_CHANGES), 4 * 3600
        else:
            base, spread = utc(2026, 6, 1), 300 * 86400
        moments.append(base + timedelta(seconds=rng.uniform(-spread, spread)))
    return moments


@pytest.mark.parametrize("timezone", WALK_ZONES)
def test_walking_next_after_visits_every_slot_exactly_once(timezone: str) -> None:
    rng = random.Random(f"walk-{timezone}")
    for text in WALK_EXPRESSIONS:
        schedule = parse(text, timezone, now=utc(2026, 1, 1))
        for start in random_moments(rng, 6):
            walk: list[datetime] = []
            moment = start
            for _ in range(40):
                fire = schedule.next_after(moment)
                assert fire is not None
                assert fire > moment
                walk.append(fire)
                moment = fire
            assert schedule.slots_between(start, walk[-1], 1000) == walk, (text, start)
            assert len(set(walk)) == len(walk)
            for earlier, later in pairwise(walk):
                assert (later - earlier).total_seconds() >= MIN_GAP_S
                inside = earlier + (later - earlier) * rng.random()
                # A clock stepped back to any moment before a slot gets that slot again, never a new one.
                assert schedule.next_after(inside) == later, (text, inside)
                assert schedule.next_after(later - timedelta(microseconds=1)) == later


def test_next_after_accepts_any_zone_and_answers_in_utc() -> None:
    schedule = parse("0 * * * *", BERLIN)
    moment = datetime(2026, 3, 1, 13, 30, tzinfo=ZoneInfo(NEW_YORK))
    fire = schedule.next_after(moment)
    assert fire == utc(2026, 3, 1, 19)
    assert fire is not None
    assert fire.tzinfo is UTC


def test_interval_slots_count_from_the_anchor_even_before_it() -> None:
    schedule = parse("every 30m")
    assert schedule.next_after(utc(2026, 1, 1)) == utc(2026, 3, 1, 12, 30)
    assert schedule.next_after(utc(2026, 3, 1, 12, 30)) == utc(2026, 3, 1, 13)
    assert schedule.next_after(utc(2026, 3, 2, 0, 10)) == utc(2026, 3, 2, 0, 30)


def test_slots_between_is_half_open_and_limited_oldest_first() -> None:
    schedule = parse("every 30m")
    start, end = utc(2026, 3, 1, 12, 30), utc(2026, 3, 1, 15)
    assert schedule.slots_between(start, end, 100) == [
        utc(2026, 3, 1, 13),
        utc(2026, 3, 1, 13, 30),
        utc(2026, 3, 1, 14),
        utc(2026, 3, 1, 14, 30),
        utc(2026, 3, 1, 15),
    ]
    assert schedule.slots_between(start, end, 2) == [utc(2026, 3, 1, 13), utc(2026, 3, 1, 13, 30)]
    assert schedule.slots_between(start, end, 0) == []
    assert schedule.slots_between(end, start, 10) == []
    assert schedule.slots_between(end, end, 10) == []


def test_cron_slots_between_respects_the_limit() -> None:
    schedule = parse("*/5 * * * *")
    slots = schedule.slots_between(NOW, utc(2026, 3, 2), 3)
    assert slots == [utc(2026, 3, 1, 12, 5), utc(2026, 3, 1, 12, 10), utc(2026, 3, 1, 12, 15)]


def test_one_shot_slots_between() -> None:
    schedule = parse("once_at 2026-03-01T15:00:00Z")
    assert schedule.slots_between(NOW, utc(2026, 3, 2), 10) == [utc(2026, 3, 1, 15)]
    assert schedule.slots_between(NOW, utc(2026, 3, 1, 14, 59), 10) == []
    assert schedule.slots_between(utc(2026, 3, 1, 15), utc(2026, 3, 2), 10) == []
