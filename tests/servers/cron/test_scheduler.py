"""The scheduler on a manual clock: fires, overlap, retries, manual fires, pause and resume, jitter
reloads, DST and clock steps, retention, and the sleep until the next due time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from servers.cron.errors import StateRefused
from servers.cron.jitter import JitterKnobs, due_at, expired_by_age
from servers.cron.scheduler import TickReport
from servers.cron.settings import CronSettings
from servers.cron.state import Caller, CronState, open_state
from shared.protocol.cron import FirePayload, PollerSpec
from tests.servers.cron.conftest import (
    START,
    ManualClock,
    Pacer,
    at,
    events,
    fire_rows,
    make_settings,
    opened,
    rows,
    stamp,
)

pytestmark = pytest.mark.anyio
OWNER = Caller(binding="home", agent="nexo", provider="anthropic", model="claude-sonnet-4-5")


async def hourly(state: CronState, **options: Any) -> str:
    entry = await state.create(OWNER, kind="prompt", schedule="0 * * * *", text="check the mail", **options)
    return entry.id


async def tick_and_finish(state: CronState, moment: datetime) -> TickReport:
    """A tick whose fires are all reported done, as the orchestrator would."""
    report = await state.tick(moment)
    for fire_id in report.fired:
        await state.report(fire_id, "done")
    return report


def fire_events(settings: CronSettings) -> list[FirePayload]:
    return [FirePayload.model_validate(payload) for _, _, payload in events(settings.database, "cron_fire")]


async def test_a_due_entry_fires_once_with_everything_needed_to_run_it(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly(state, channel="telegram", recipient="ana")
        early = await state.tick(at(12, 59))
        clock.set(at(13))
        report = await state.tick(at(13))
        again = await state.tick(at(13))
        entry = await state.get(entry_id)
    assert (early.fired, len(report.fired), again.fired) == ([], 1, [])
    [payload] = fire_events(settings)
    assert payload.model_dump() == {
        "fire_id": report.fired[0],
        "entry_id": entry_id,
        "kind": "prompt",
        "binding": "home",
        "agent": "nexo",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "text": "check the mail",
        "channel": "telegram",
        "recipient": "ana",
        "schedule": "cron 0 * * * *",
        "timezone": "UTC",
        "slot": stamp(at(13)),
        "due_at": stamp(at(13)),
        "attempt": 1,
        "manual": False,
        "reason": "schedule",
    }
    [(_, key, _)] = events(settings.database, "cron_fire")
    assert key == f"fire:{entry_id}:{stamp(at(13))}:1"
    assert fire_rows(settings.database) == [(stamp(at(13)), "delivered", "schedule")]
    assert (entry.next_slot, entry.next_due) == (at(14), at(14))
    assert report.next_wake == at(14)


@dataclass
class RecordingWait:
    """A wait function that sleeps until woken and records what it was asked."""

    timeouts: list[float] = field(default_factory=list)
    called: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, woken: anyio.Event, timeout: float) -> None:
        self.timeouts.append(timeout)
        self.called.set()
        await woken.wait()

    async def next_call(self) -> None:
        with anyio.fail_after(10):
            await self.called.wait()
        self.called = anyio.Event()


async def test_the_scheduler_sleeps_until_the_next_due_time_and_wakes_for_a_new_entry(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = make_settings(tmp_path, max_sleep_s=3_600)
    wait = RecordingWait()
    async with open_state(settings, clock=clock, wait=wait, monotonic=lambda: 0.0) as state:
        await wait.next_call()
        clock.set(at(12, 30))
        await hourly(state)
        await wait.next_call()
    assert wait.timeouts == [3_600.0, 1_800.0]


async def test_a_wall_clock_step_is_logged_and_changes_nothing_else(
    settings: CronSettings, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    pacer = Pacer()
    async with open_state(settings, clock=clock, wait=pacer, monotonic=lambda: 0.0) as state:
        entry_id = await hourly(state, misfire="skip")
        clock.advance(hours=2)
        await pacer.step()
        clock.advance(hours=-1)
        await pacer.step()
        entry = await state.get(entry_id)
    messages = [record.getMessage() for record in caplog.records if record.name == "nexo.cron"]
    assert "the wall clock jumped 7200 s forward" in messages[0]
    assert "the wall clock stepped 3600 s back" in messages[1]
    assert entry.next_slot == at(15)


async def test_fires_wait_in_the_database_while_the_event_log_is_full(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = make_settings(tmp_path, max_pending_events=2)
    async with opened(settings, clock) as state:
        for _ in range(3):
            await hourly(state)
        full = await state.tick(clock.set(at(13)))
        held = [fire.status for fire in await state.store.fires()]
        await state.events.ack([1, 2])
        later = await state.tick(clock.advance(seconds=5))
    assert (len(full.fired), full.backlog, full.next_wake) == (2, True, at(13) + timedelta(seconds=5))
    assert sorted(held) == ["delivered", "delivered", "pending"]
    assert (later.redelivered, later.backlog) == (1, False)
    assert len(events(settings.database, "cron_fire")) == 3


async def test_jitter_moves_recurring_fires_later_and_one_shots_earlier(
    tmp_path: Path, clock: ManualClock
) -> None:
    knobs = JitterKnobs(recurring_frac=1.0, recurring_cap_ms=300_000, one_shot_max_ms=30_000)
    settings = make_settings(tmp_path, jitter=knobs)
    async with opened(settings, clock) as state:
        recurring = await state.get(await hourly(state))
        once = await state.create(OWNER, kind="reminder", schedule="once_at 13:00", text="t", channel="c")
        assert recurring.next_due is not None
        assert once.next_due is not None
        first = min(recurring.next_due, once.next_due)
        before = await state.tick(clock.set(first - timedelta(microseconds=1)))
        reports = [await state.tick(clock.set(due)) for due in sorted([recurring.next_due, once.next_due])]
    assert at(13) <= recurring.next_due < at(13, 5)
    assert at(13) - timedelta(seconds=30) < once.next_due <= at(13)
    assert before.fired == []
    assert [len(report.fired) for report in reports] == [1, 1]
    due_times = {p.entry_id: p.due_at for p in fire_events(settings)}
    assert due_times == {recurring.id: stamp(recurring.next_due), once.id: stamp(once.next_due)}


async def test_overlap_skip_records_a_slot_whose_previous_fire_is_still_running(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        skip = await hourly(state)
        allow = (await state.create(OWNER, kind="prompt", schedule="30 * * * *", text="x")).id
        async with state.store.writing() as w:
            await w.update_entry(allow, overlap="allow")
        for moment in (at(12, 30), at(13), at(13, 30), at(14), at(14, 30)):
            await state.tick(moment)
        first_of_skip = (await state.store.fires(entry_id=skip, limit=5))[-1]
        await state.report(first_of_skip.id, "done")
        await state.tick(at(15))
    assert fire_rows(settings.database, skip) == [
        (stamp(at(13)), "done", "schedule"),
        (stamp(at(14)), "skipped_overlap", "overlap"),
        (stamp(at(15)), "delivered", "schedule"),
    ]
    assert [status for _, status, _ in fire_rows(settings.database, allow)] == ["delivered"] * 3
    [(_, _, missed)] = events(settings.database, "cron_missed")
    assert missed == {
        "entry_id": skip,
        "binding": "home",
        "agent": "nexo",
        "kind": "prompt",
        "reason": "overlap",
        "slots": [stamp(at(14))],
        "count": 1,
        "parked": False,
    }


async def test_a_failed_one_shot_is_retried_after_30_then_60_seconds_then_marked_failed(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry = await state.create(
            OWNER, kind="reminder", schedule="once_at 13:00", text="stretch", channel="tg"
        )
        report = await state.tick(clock.set(at(13)))
        [fire_id] = report.fired
        fire, _ = await state.report(fire_id, "failed", error="telegram said 502", attempt=1)
        assert (fire.status, fire.retry_at) == ("retrying", at(13, 0) + timedelta(seconds=30))
        assert (await state.tick(clock.set(at(13) + timedelta(seconds=29)))).fired == []
        assert (await state.tick(clock.set(at(13) + timedelta(seconds=30)))).fired == [fire_id]
        stale, _ = await state.report(fire_id, "done", attempt=1)
        assert stale.status == "delivered"
        fire, _ = await state.report(fire_id, "failed", error="502 again", attempt=2)
        assert fire.retry_at == clock.now + timedelta(seconds=60)
        await state.tick(clock.advance(seconds=60))
        fire, ended = await state.report(fire_id, "failed", error="still 502", attempt=3)
        repeated, _ = await state.report(fire_id, "failed", attempt=3)
    attempts = [(p.attempt, p.due_at, p.reason) for p in fire_events(settings)]
    assert attempts == [
        (1, stamp(at(13)), "schedule"),
        (2, stamp(at(13) + timedelta(seconds=30)), "schedule"),
        (3, stamp(at(13) + timedelta(seconds=90)), "schedule"),
    ]
    assert (fire.status, fire.error, fire.attempt) == ("failed", "still 502", 3)
    assert (ended.state, ended.finished_at) == ("failed", clock.now)
    assert repeated == fire
    assert entry.id == ended.id


async def test_a_recurring_failure_is_not_retried_and_a_done_one_shot_finishes(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        recurring = await hourly(state)
        once = (await state.create(OWNER, kind="prompt", schedule="once_at 13:00", text="once")).id
        report = await state.tick(at(13))
        outcomes = {}
        for fire_id in report.fired:
            fire = await state.store.fire(fire_id)
            assert fire is not None
            outcome = "failed" if fire.entry_id == recurring else "done"
            outcomes[fire.entry_id] = await state.report(fire_id, outcome)
    fire, entry = outcomes[recurring]
    assert (fire.status, fire.retry_at, entry.state, entry.next_slot) == ("failed", None, "active", at(14))
    fire, entry = outcomes[once]
    assert (fire.status, entry.state, entry.next_slot) == ("done", "done", None)


async def test_a_manual_fire_runs_now_outside_the_schedule(
    settings: CronSettings, clock: ManualClock
) -> None:
    moment = at(12, 10) + timedelta(microseconds=5)
    async with opened(settings, clock) as state:
        entry_id = await hourly(state)
        clock.set(moment)
        fire = await state.fire(entry_id)
        second = await state.fire(entry_id)
        entry = await state.get(entry_id)
        await state.pause(entry_id)
        paused_fire = await state.fire(entry_id)
    assert (fire.slot, fire.due_at, fire.manual, fire.reason, fire.status) == (
        moment,
        moment,
        True,
        "manual",
        "delivered",
    )
    assert second.slot == moment + timedelta(microseconds=1)
    assert paused_fire.slot == moment + timedelta(microseconds=2)
    assert entry.next_slot == at(13)
    assert next((p.manual, p.slot) for p in fire_events(settings)) == (True, stamp(moment))


async def test_pause_stops_fires_and_resume_continues_after_now_without_missed_rows(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly(state)
        paused = await state.pause(entry_id)
        quiet = await state.tick(clock.set(at(15, 30)))
        resumed = await state.resume(entry_id)
        later = await state.tick(clock.set(at(16)))
        await state.store.db.execute("UPDATE entries SET state = 'done' WHERE id = ?", (entry_id,))
        with pytest.raises(StateRefused, match="is done"):
            await state.pause(entry_id)
    assert (paused.state, quiet.fired, quiet.missed) == ("paused", [], 0)
    assert (resumed.state, resumed.next_slot) == ("active", at(16))
    assert len(later.fired) == 1
    assert fire_rows(settings.database) == [(stamp(at(16)), "delivered", "schedule")]


async def test_configure_reloads_the_jitter_and_moves_the_next_due_time(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly(state)
        before = await state.get(entry_id)
        knobs, rescheduled = await state.configure({"enabled": True})
        after = await state.get(entry_id)
    expected = due_at(entry_id, before.schedule, at(13), JitterKnobs.model_validate(knobs))
    assert (before.next_due, rescheduled) == (at(13), 1)
    assert after.next_due == expected != at(13)
    async with opened(settings, clock) as reopened:
        assert reopened.knobs.enabled is True
        assert (await reopened.get(entry_id)).next_due == expected


async def test_an_hourly_entry_fires_once_per_instant_across_the_dst_fall_back(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    clock = ManualClock(datetime(2026, 10, 24, 22, 30, tzinfo=UTC))
    async with opened(settings, clock) as state:
        entry = await state.create(
            OWNER, kind="prompt", schedule="0 * * * *", text="x", timezone="Europe/Madrid"
        )
        moment = clock.now
        while moment < datetime(2026, 10, 25, 4, 30, tzinfo=UTC):
            moment += timedelta(minutes=15)
            await tick_and_finish(state, clock.set(moment))
            await tick_and_finish(state, clock.set(moment - timedelta(minutes=50)))  # an NTP step back
            await tick_and_finish(state, clock.set(moment))
    slots = [slot for slot, _, _ in fire_rows(settings.database, entry.id)]
    assert slots == [stamp(datetime(2026, 10, 24, 23, tzinfo=UTC) + timedelta(hours=h)) for h in range(6)]
    local = [
        datetime.fromisoformat(p.slot).astimezone(entry.schedule._zone).hour for p in fire_events(settings)
    ]
    assert local == [1, 2, 2, 3, 4, 5]


async def test_a_backward_clock_step_never_fires_a_slot_twice(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        entry_id = await hourly(state)
        await tick_and_finish(state, clock.set(at(13)))
        clock.set(at(12, 0))
        stepped_back = await state.tick()
        await tick_and_finish(state, clock.set(at(13, 30)))
        await tick_and_finish(state, clock.set(at(14)))
    assert stepped_back.fired == []
    assert [slot for slot, _, _ in fire_rows(settings.database, entry_id)] == [stamp(at(13)), stamp(at(14))]
    assert len(events(settings.database, "cron_fire")) == 2


async def test_done_one_shots_are_purged_a_day_after_they_finished(
    settings: CronSettings, clock: ManualClock
) -> None:
    async with opened(settings, clock) as state:
        done = await state.create(OWNER, kind="reminder", schedule="once_at 13:00", text="a", channel="tg")
        kept = await hourly(state, misfire="skip")
        report = await tick_and_finish(state, clock.set(at(13)))
        early = await state.tick(clock.set(at(13) + timedelta(hours=23)))
        still_there = await state.store.entry(done.id)
        late = await state.tick(clock.set(at(13) + timedelta(hours=24, minutes=1)))
        gone = await state.store.entry(done.id)
    assert still_there is not None
    assert still_there.state == "done"
    assert gone is None
    assert (len(report.fired), early.purged, late.purged) == (2, 0, 1)
    assert rows(settings.database, "SELECT count(*) FROM fires WHERE entry_id = ?", (done.id,)) == [(0,)]
    assert rows(settings.database, "SELECT state FROM entries WHERE id = ?", (kept,)) == [("active",)]


async def test_recurring_entries_past_the_maximum_age_expire_but_pollers_do_not(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = make_settings(tmp_path, jitter=JitterKnobs(enabled=False, recurring_max_age_ms=2 * 3_600_000))
    async with opened(settings, clock) as state:
        entry_id = await hourly(state, misfire="skip")
        await state.sync_pollers("home", "nexo", [PollerSpec(name="inbox", schedule="every 1h", prompt="p")])
        young = await state.tick(clock.set(at(13, 59)))
        old = await state.tick(clock.set(at(14, 1)))
        entry = await state.get(entry_id)
        poller = await state.get("poller:home:inbox")
    assert not expired_by_age(START, at(13, 59), settings.jitter, recurring=True, permanent=False)
    assert (young.expired, old.expired) == ([], [entry_id])
    assert (entry.state, entry.finished_at, entry.next_due) == ("expired", at(14, 1), None)
    assert poller.state == "active"
