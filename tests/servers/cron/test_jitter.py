"""Per-entry jitter: inside its window, stable per entry id, spread out, and never late for one-shots."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from servers.cron.jitter import JitterKnobs, due_at, entry_fraction, expired_by_age, jitter_offset
from servers.cron.schedule import Schedule
from servers.cron.schedule_parse import parse_schedule

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
IDS = [f"cron-{index:05d}" for index in range(10_000)]
ZERO = timedelta(0)


def parse(text: str, timezone: str = "UTC", now: datetime = NOW) -> Schedule:
    return parse_schedule(text, timezone=timezone, now=now)


def test_the_defaults() -> None:
    assert JitterKnobs().model_dump() == {
        "enabled": True,
        "recurring_frac": 0.10,
        "recurring_cap_ms": 300_000,
        "one_shot_max_ms": 30_000,
        "one_shot_floor_ms": 0,
        "one_shot_minute_mod": 1,
        "recurring_max_age_ms": 0,
    }


@pytest.mark.parametrize(
    ("values", "fragments"),
    [
        ({"recurring_frac": 1.5}, ["recurring_frac must be between 0 and 1", "1.5"]),
        ({"recurring_frac": -0.1}, ["recurring_frac must be between 0 and 1"]),
        ({"recurring_frac": float("nan")}, ["recurring_frac must be between 0 and 1"]),
        ({"recurring_cap_ms": -1}, ["recurring_cap_ms must be 0 or more, got -1"]),
        ({"one_shot_max_ms": -5}, ["one_shot_max_ms must be 0 or more"]),
        ({"one_shot_floor_ms": -5}, ["one_shot_floor_ms must be 0 or more"]),
        ({"one_shot_minute_mod": -1}, ["one_shot_minute_mod must be 0 or more"]),
        ({"recurring_max_age_ms": -1}, ["recurring_max_age_ms must be 0 or more"]),
        (
            {"one_shot_floor_ms": 40_000},
            ["one_shot_floor_ms (40000) must be between 0 and one_shot_max_ms (30000)", "lower the floor"],
        ),
        ({"recurring_fraction": 0.2}, ["recurring_fraction", "Extra inputs are not permitted"]),
    ],
)
def test_invalid_knobs_name_the_knob_and_its_range(values: dict[str, object], fragments: list[str]) -> None:
    with pytest.raises(ValidationError) as caught:
        JitterKnobs.model_validate(values)
    message = str(caught.value)
    assert [fragment for fragment in fragments if fragment not in message] == [], message


def test_the_fraction_is_the_top_53_bits_of_the_sha256_of_the_id() -> None:
    digest = hashlib.sha256(b"cron-00042").digest()
    assert entry_fraction("cron-00042") == (int.from_bytes(digest[:8], "big") >> 11) / 2**53
    fractions = [entry_fraction(entry_id) for entry_id in IDS]
    assert all(0.0 <= fraction < 1.0 for fraction in fractions)


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("every 10m", timedelta(seconds=60)),  # 10 % of the interval
        ("every 1h", timedelta(seconds=300)),  # capped at 300 s
        ("*/5 * * * *", timedelta(seconds=30)),
        ("0 9 * * *", timedelta(seconds=300)),
    ],
)
def test_recurring_offsets_stay_inside_their_window(text: str, window: timedelta) -> None:
    schedule, knobs = parse(text), JitterKnobs()
    offsets = [jitter_offset(entry_id, schedule, knobs) for entry_id in IDS]
    assert all(ZERO <= offset < window for offset in offsets)
    assert max(offsets) > window * 0.99
    assert min(offsets) < window * 0.01


def test_recurring_offsets_are_spread_over_the_window() -> None:
    schedule, knobs = parse("every 1h"), JitterKnobs()
    window = timedelta(seconds=300)
    buckets = [0] * 20
    for entry_id in IDS:
        buckets[int(jitter_offset(entry_id, schedule, knobs) / window * 20)] += 1
    assert sum(1 for count in buckets if count) >= 18
    assert all(350 <= count <= 650 for count in buckets), buckets
    assert len({jitter_offset(entry_id, schedule, knobs) for entry_id in IDS}) > 9_990


def test_offsets_are_stable_across_calls_and_fresh_schedules() -> None:
    knobs = JitterKnobs()
    first = [jitter_offset(entry_id, parse("every 1h"), knobs) for entry_id in IDS[:500]]
    again = [
        jitter_offset(entry_id, parse("every 1h", now=NOW + timedelta(days=3)), knobs)
        for entry_id in IDS[:500]
    ]
    rebuilt = Schedule("interval", "every 1h", "UTC", NOW)
    stored = [jitter_offset(entry_id, rebuilt, JitterKnobs()) for entry_id in IDS[:500]]
    assert first == again == stored
    cron = [jitter_offset("cron-00007", parse("0 9 * * *"), knobs) for _ in range(3)]
    assert len(set(cron)) == 1


def one_shot_at(moment: datetime, timezone: str = "UTC") -> Schedule:
    return parse(f"once_at {moment.isoformat()}", timezone, now=moment - timedelta(hours=1))


def test_one_shot_offsets_are_early_inside_floor_and_max() -> None:
    knobs = JitterKnobs(one_shot_floor_ms=5_000, one_shot_max_ms=30_000)
    schedule = one_shot_at(datetime(2026, 3, 1, 15, tzinfo=UTC))
    offsets = [jitter_offset(entry_id, schedule, knobs) for entry_id in IDS]
    assert all(timedelta(seconds=-30) < offset <= timedelta(seconds=-5) for offset in offsets)
    assert min(offsets) < timedelta(seconds=-29.9)
    assert max(offsets) > timedelta(seconds=-5.1)
    buckets = {int((offset + timedelta(seconds=30)) / timedelta(seconds=25) * 20) for offset in offsets}
    assert len(buckets) >= 18


def test_one_shots_are_never_late_and_never_earlier_than_the_maximum() -> None:
    knobs = JitterKnobs()
    slot = datetime(2026, 3, 1, 15, tzinfo=UTC)
    schedule = one_shot_at(slot)
    for entry_id in IDS:
        due = due_at(entry_id, schedule, slot, knobs)
        assert slot - timedelta(milliseconds=knobs.one_shot_max_ms) <= due <= slot


def test_a_floor_equal_to_the_maximum_gives_every_one_shot_the_same_offset() -> None:
    knobs = JitterKnobs(one_shot_floor_ms=10_000, one_shot_max_ms=10_000)
    schedule = one_shot_at(datetime(2026, 3, 1, 15, tzinfo=UTC))
    assert {jitter_offset(entry_id, schedule, knobs) for entry_id in IDS[:100]} == {timedelta(seconds=-10)}


@pytest.mark.parametrize(
    ("moment", "minute_mod", "jittered"),
    [
        (datetime(2026, 3, 1, 15, 7, tzinfo=UTC), 1, True),
        (datetime(2026, 3, 1, 15, 7, tzinfo=UTC), 5, False),
        (datetime(2026, 3, 1, 15, 10, tzinfo=UTC), 5, True),
        (datetime(2026, 3, 1, 15, 0, tzinfo=UTC), 0, False),
        (datetime(2026, 3, 1, 15, 10, 30, tzinfo=UTC), 1, False),
    ],
)
def test_one_shots_are_jittered_only_on_the_chosen_minutes(
    moment: datetime, minute_mod: int, jittered: bool
) -> None:
    knobs = JitterKnobs(one_shot_minute_mod=minute_mod)
    offsets = [jitter_offset(entry_id, one_shot_at(moment), knobs) for entry_id in IDS[:200]]
    if jittered:
        assert all(offset < ZERO for offset in offsets)
    else:
        assert set(offsets) == {ZERO}


def test_the_one_shot_minute_is_read_on_the_wall_clock_of_its_timezone() -> None:
    knobs = JitterKnobs(one_shot_minute_mod=60)
    nine_local = one_shot_at(datetime(2026, 3, 1, 3, 30, tzinfo=UTC), "Asia/Kolkata")  # 09:00 IST
    half_past = one_shot_at(datetime(2026, 3, 1, 3, 0, tzinfo=UTC), "Asia/Kolkata")  # 08:30 IST
    assert jitter_offset("cron-1", nine_local, knobs) < ZERO
    assert jitter_offset("cron-1", half_past, knobs) == ZERO


def test_disabled_jitter_is_zero_everywhere() -> None:
    knobs = JitterKnobs(enabled=False)
    slot = datetime(2026, 3, 1, 15, tzinfo=UTC)
    for schedule in (parse("every 1h"), parse("0 9 * * *"), one_shot_at(slot)):
        assert {jitter_offset(entry_id, schedule, knobs) for entry_id in IDS[:200]} == {ZERO}
        assert due_at("cron-1", schedule, slot, knobs) == slot


def test_a_zero_window_gives_zero_offsets() -> None:
    schedule = parse("every 1h")
    for knobs in (JitterKnobs(recurring_frac=0.0), JitterKnobs(recurring_cap_ms=0)):
        assert {jitter_offset(entry_id, schedule, knobs) for entry_id in IDS[:200]} == {ZERO}


def test_due_at_adds_the_offset_to_the_slot() -> None:
    schedule, knobs = parse("every 1h"), JitterKnobs()
    slot = datetime(2026, 3, 1, 13, tzinfo=UTC)
    offset = jitter_offset("cron-00001", schedule, knobs)
    assert offset > ZERO
    assert due_at("cron-00001", schedule, slot, knobs) == slot + offset
    with pytest.raises(ValueError, match=r"slot=.* has no timezone"):
        due_at("cron-00001", schedule, datetime(2026, 3, 1, 13), knobs)


@pytest.mark.parametrize(
    ("age", "max_age_ms", "recurring", "permanent", "expired"),
    [
        (timedelta(days=30), 0, True, False, False),
        (timedelta(days=2), 86_400_000, True, False, True),
        (timedelta(days=1), 86_400_000, True, False, False),
        (timedelta(hours=23), 86_400_000, True, False, False),
        (timedelta(days=2), 86_400_000, True, True, False),
        (timedelta(days=2), 86_400_000, False, False, False),
    ],
)
def test_recurring_entries_expire_by_age_unless_permanent(
    age: timedelta, max_age_ms: int, recurring: bool, permanent: bool, expired: bool
) -> None:
    knobs = JitterKnobs(recurring_max_age_ms=max_age_ms)
    verdict = expired_by_age(NOW - age, NOW, knobs, recurring=recurring, permanent=permanent)
    assert verdict is expired


def test_expiry_by_age_does_not_depend_on_jitter_being_enabled() -> None:
    knobs = JitterKnobs(enabled=False, recurring_max_age_ms=1_000)
    assert expired_by_age(NOW - timedelta(seconds=2), NOW, knobs, recurring=True, permanent=False)


def test_expiry_by_age_refuses_naive_datetimes() -> None:
    naive = datetime(2026, 3, 1, 12)
    knobs = JitterKnobs(recurring_max_age_ms=1_000)
    with pytest.raises(ValueError, match=r"created_at=.* has no timezone"):
        expired_by_age(naive, NOW, knobs, recurring=True, permanent=False)
    with pytest.raises(ValueError, match=r"now=.* has no timezone"):
        expired_by_age(NOW, naive, knobs, recurring=True, permanent=False)
