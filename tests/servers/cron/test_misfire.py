"""Slots that came due while the server was down: each misfire policy, grace windows, row caps,
parking and resuming, one-shots, and config-owned pollers."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from servers.cron.settings import CronSettings
from servers.cron.state import Caller, CronState
from shared.protocol.cron import MissedPayload, PollerSpec
from tests.servers.cron.conftest import ManualClock, at, events, fire_rows, make_settings, opened, stamp

pytestmark = pytest.mark.anyio
OWNER = Caller(binding="home", agent="nexo")
OUTAGE_SLOTS = [stamp(at(hour)) for hour in range(14, 20)]
"""Down from just after the 13:00 fire until 19:30: six hourly slots passed."""


async def hourly_with_a_fire_at_13(state: CronState, clock: ManualClock, misfire: str) -> str:
    entry = await state.create(OWNER, kind="prompt", schedule="0 * * * *", text="p", misfire=misfire)
    [fire_id] = (await state.tick(clock.set(at(13)))).fired
    await state.report(fire_id, "done")
    return entry.id


def missed_events(settings: CronSettings) -> list[MissedPayload]:
    return [MissedPayload.model_validate(p) for _, _, p in events(settings.database, "cron_missed")]


def fired_slots(settings: CronSettings) -> list[str]:
    return [payload["slot"] for _, _, payload in events(settings.database, "cron_fire")]


@pytest.mark.parametrize(
    ("policy", "fired", "missed", "state"),
    [
        ("catch_up_once", [stamp(at(19))], OUTAGE_SLOTS[:5], "active"),
        ("all", OUTAGE_SLOTS, [], "active"),
        ("skip", [], OUTAGE_SLOTS, "active"),
        ("park", [], OUTAGE_SLOTS, "parked"),
    ],
)
async def test_a_six_hour_outage_of_an_hourly_entry_follows_its_misfire_policy(
    settings: CronSettings, clock: ManualClock, policy: str, fired: list[str], missed: list[str], state: str
) -> None:
    async with opened(settings, clock) as before:
        entry_id = await hourly_with_a_fire_at_13(before, clock, policy)
    async with opened(settings, clock) as after:
        report = await after.tick(clock.set(at(19, 30)))
        entry = await after.get(entry_id)
    assert fired_slots(settings) == [stamp(at(13)), *fired]
    rows = fire_rows(settings.database, entry_id)
    assert [slot for slot, status, _ in rows if status == "missed"] == missed
    assert {reason for _, status, reason in rows if status == "delivered"} <= {"catch_up"}
    assert (len(report.fired), report.missed) == (len(fired), len(missed))
    assert (entry.state, entry.next_slot) == (state, at(20))
    expected = (
        []
        if not missed
        else [
            MissedPayload(
                entry_id=entry_id,
                binding="home",
                agent="nexo",
                kind="prompt",
                reason="downtime",
                slots=missed,
                count=len(missed),
                parked=policy == "park",
            )
        ]
    )
    assert missed_events(settings) == expected
    assert report.parked == ([entry_id] if policy == "park" else [])


async def test_all_fires_only_the_slots_inside_the_grace_window(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as before:
        entry_id = await hourly_with_a_fire_at_13(before, clock, "all")
        async with before.store.writing() as w:
            await w.update_entry(entry_id, grace_s=3 * 3600.0)
    async with opened(settings, clock) as after:
        await after.tick(clock.set(at(19, 30)))
    assert fired_slots(settings) == [stamp(at(13)), *OUTAGE_SLOTS[3:]]
    [missed] = missed_events(settings)
    assert (missed.slots, missed.count) == (OUTAGE_SLOTS[:3], 3)


async def test_a_slot_late_by_less_than_the_tolerance_fires_normally(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly_with_a_fire_at_13(state, clock, "park")
        report = await state.tick(clock.set(at(14) + timedelta(seconds=59)))
        entry = await state.get(entry_id)
    assert (len(report.fired), report.missed, entry.state) == (1, 0, "active")


@pytest.mark.parametrize(("cap", "listed"), [(10, 10), (150, 100)])
async def test_missed_rows_are_capped_per_sweep_and_the_event_counts_them_all(
    tmp_path: Path, clock: ManualClock, cap: int, listed: int
) -> None:
    settings = make_settings(tmp_path, max_missed_rows=cap)
    async with opened(settings, clock) as state:
        entry = await state.create(OWNER, kind="prompt", schedule="every 1m", text="p", misfire="skip")
        report = await state.tick(clock.set(at(15, 0) + timedelta(seconds=30)))
        after = await state.get(entry.id)
    assert report.missed == 180
    rows = fire_rows(settings.database, entry.id)
    assert len(rows) == cap
    assert rows[-1][0] == stamp(at(15))
    [missed] = missed_events(settings)
    assert (missed.count, len(missed.slots), missed.slots[-1]) == (180, listed, stamp(at(15)))
    assert after.next_slot == at(15, 1)


async def test_a_parked_entry_resumes_after_now_and_records_what_passed_while_parked(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as before:
        entry_id = await hourly_with_a_fire_at_13(before, clock, "park")
    async with opened(settings, clock) as after:
        await after.tick(clock.set(at(19, 30)))
        waiting = await after.tick(clock.set(at(21, 30)))
        resumed = await after.resume(entry_id)
        await after.tick(clock.set(at(22)))
    assert waiting.fired == []
    assert (resumed.state, resumed.next_slot) == ("active", at(22))
    downtime, parked = missed_events(settings)
    assert (downtime.reason, downtime.count, downtime.parked) == ("downtime", 6, True)
    assert (parked.reason, parked.slots, parked.count) == ("parked", [stamp(at(20)), stamp(at(21))], 2)
    statuses = [(slot, status, reason) for slot, status, reason in fire_rows(settings.database, entry_id)]
    assert statuses[-3:] == [
        (stamp(at(20)), "missed", "parked"),
        (stamp(at(21)), "missed", "parked"),
        (stamp(at(22)), "delivered", "schedule"),
    ]


async def test_a_parked_reminder_is_sent_when_resumed(settings: CronSettings, clock: ManualClock) -> None:
    async with opened(settings, clock) as before:
        entry = await before.create(
            OWNER, kind="reminder", schedule="once_at 13:00", text="call mum", channel="tg"
        )
    async with opened(settings, clock) as after:
        report = await after.tick(clock.set(at(15)))
        parked = await after.get(entry.id)
        resumed = await after.resume(entry.id)
        [(_, _, payload)] = events(settings.database, "cron_fire")
        done_fire, done = await after.report(payload["fire_id"], "done")
    assert report.parked == [entry.id]
    assert (parked.state, parked.next_slot) == ("parked", at(13))
    assert (resumed.state, resumed.next_slot) == ("active", None)
    assert fire_rows(settings.database, entry.id) == [
        (stamp(at(13)), "missed", "downtime"),
        (stamp(at(15)), "done", "resumed"),
    ]
    assert (payload["text"], payload["kind"], payload["reason"]) == ("call mum", "reminder", "resumed")
    assert (done_fire.status, done.state) == ("done", "done")


async def test_a_paused_one_shot_whose_time_passed_fires_on_its_own_slot_when_resumed(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry = await state.create(OWNER, kind="prompt", schedule="once_at 13:00", text="p")
        await state.pause(entry.id)
        await state.tick(clock.set(at(15)))
        await state.resume(entry.id)
    assert fire_rows(settings.database, entry.id) == [(stamp(at(13)), "delivered", "resumed")]
    assert missed_events(settings) == []


async def test_a_one_shot_that_skips_its_missed_time_expires(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry = await state.create(OWNER, kind="prompt", schedule="once_at 13:00", text="p", misfire="skip")
        report = await state.tick(clock.set(at(15)))
        after = await state.get(entry.id)
    assert (report.expired, after.state, after.finished_at) == ([entry.id], "expired", at(15))
    assert fire_rows(settings.database, entry.id) == [(stamp(at(13)), "missed", "downtime")]


async def test_a_recurring_entry_created_to_fire_once_catches_up_once(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry = await state.create(
            OWNER, kind="prompt", schedule="0 * * * *", text="p", recurring=False, misfire="catch_up_once"
        )
        report = await state.tick(clock.set(at(15)))
        after = await state.get(entry.id)
        _, finished = await state.report(report.fired[0], "done")
    assert fire_rows(settings.database, entry.id) == [(stamp(at(13)), "done", "catch_up")]
    assert (after.state, after.next_slot, finished.state) == ("active", None, "done")


async def test_pollers_are_never_parked(settings: CronSettings, clock: ManualClock) -> None:
    async with opened(settings, clock) as state:
        spec = PollerSpec(name="inbox", schedule="0 * * * *", prompt="p", misfire="park")
        await state.sync_pollers("home", "nexo", [spec])
        report = await state.tick(clock.set(at(15, 30)))
        poller = await state.get("poller:home:inbox")
    assert (report.parked, report.missed) == ([], 3)
    assert (poller.state, poller.next_slot) == ("active", at(16))


async def test_a_clock_that_jumps_forward_is_handled_like_downtime(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly_with_a_fire_at_13(state, clock, "catch_up_once")
        jumped: datetime = clock.set(at(16, 10))
        report = await state.tick(jumped)
    assert fired_slots(settings) == [stamp(at(13)), stamp(at(16))]
    assert (report.missed, fire_rows(settings.database, entry_id)[1]) == (
        2,
        (stamp(at(14)), "missed", "downtime"),
    )
