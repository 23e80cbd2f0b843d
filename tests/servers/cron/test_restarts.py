"""Exactly once across restarts: the scheduler is cancelled at random points of random ticks (also
between a fire row's commit and its event append), the state is reopened, and in the end every slot
of every entry has exactly one row and every fire exactly one event per attempt."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from servers.cron.jitter import JitterKnobs
from servers.cron.schedule_parse import parse_schedule
from servers.cron.state import Caller, CronState
from tests.servers.cron.conftest import START, ManualClock, events, make_settings, opened, rows, stamp

pytestmark = pytest.mark.anyio
RESTARTS = 100
SEED = 20261121
OWNER = Caller(binding="home", agent="nexo")
ENTRIES = (
    # (schedule, misfire, one-shot kind)
    ("0 * * * *", "catch_up_once", "prompt"),
    ("*/20 * * * *", "all", "prompt"),
    ("every 45m", "skip", "prompt"),
    ("30 * * * *", "park", "prompt"),
    ("once_at 15:10", "park", "reminder"),
    ("once_at 18:00", "catch_up_once", "prompt"),
    ("once_at 23:00", "skip", "prompt"),
)
FIRED = ("pending", "delivered", "done", "failed", "retrying", "skipped")
NOT_FIRED = ("missed", "skipped_overlap")


class Saboteur:
    """The scheduler's seam: once armed, cancels the running tick at its n-th seam call."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.countdown = 0
        self.hits: Counter[str] = Counter()

    def arm(self, scope: anyio.CancelScope, countdown: int) -> None:
        self.scope, self.countdown = scope, countdown

    def disarm(self) -> None:
        self.scope = None

    async def __call__(self, point: str) -> None:
        if self.scope is None:
            return
        self.countdown -= 1
        if self.countdown == 0:
            self.hits[point] += 1
            self.scope.cancel()
            await anyio.lowlevel.checkpoint()


async def next_moment(state: CronState, rng: random.Random, now: datetime) -> datetime:
    """Around the next due time most of the time; sometimes a stretch of downtime."""
    due = await state.store.earliest_due()
    if due is None or rng.random() < 0.25:
        return now + timedelta(minutes=rng.randint(20, 150))
    return max(now, due + timedelta(seconds=rng.randint(-40, 70)))


async def act_like_the_orchestrator(state: CronState, rng: random.Random) -> None:
    """Report most delivered fires (a few as failed), resume parked entries now and then."""
    for fire in await state.store.fires(limit=1_000):
        if fire.status == "delivered" and rng.random() < 0.7:
            await state.report(fire.id, "failed" if rng.random() < 0.15 else "done", attempt=fire.attempt)
    for entry in await state.store.entries():
        if entry.state == "parked" and rng.random() < 0.5:
            await state.resume(entry.id)


def expected_slots(spec: str, timezone: str, until: datetime) -> set[str]:
    schedule = parse_schedule(spec, timezone=timezone, now=START)
    if not schedule.recurring:
        return {stamp(schedule.anchor)}
    return {stamp(slot) for slot in schedule.slots_between(START, until, 10_000)}


async def test_a_hundred_restarts_at_random_points_fire_every_slot_once_or_record_it(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, jitter=JitterKnobs(enabled=False, recurring_max_age_ms=30 * 86_400_000)
    )
    rng = random.Random(SEED)
    clock = ManualClock()
    saboteur = Saboteur()
    async with opened(settings, clock) as state:
        created = {
            (await state.create(OWNER, kind=kind, schedule=spec, text=spec, misfire=misfire)).id: spec
            for spec, misfire, kind in ENTRIES
        }
    for _ in range(RESTARTS):
        async with opened(settings, clock, seam=saboteur) as state:
            moment = clock.set(await next_moment(state, rng, clock.now))
            with anyio.CancelScope() as scope:
                saboteur.arm(scope, rng.randint(1, 8))
                await state.tick(moment)
                await act_like_the_orchestrator(state, rng)
            saboteur.disarm()
    async with opened(settings, clock) as state:
        for entry in await state.store.entries():
            if entry.state == "parked":
                await state.resume(entry.id)
        final = await state.tick(clock.now)
        entries = {entry.id: entry for entry in await state.store.entries(include_finished=True)}
    database = settings.database

    assert set(saboteur.hits) == {"fire:commit", "fire:committed", "fire:appending", "missed:appending"}
    assert final.backlog is False
    fires = rows(database, "SELECT entry_id, slot, status, attempt, manual FROM fires")
    assert [row for row in fires if row[2] == "pending"] == []
    assert all(manual == 0 for *_, manual in fires)

    # Every slot that came due has exactly one row (fired, missed or skipped), and nothing else does.
    purged = {entry_id for entry_id in created if entry_id not in entries}
    assert all(not parse_schedule(created[e], now=START).recurring for e in purged)
    assert not [row for row in fires if row[0] in purged]
    for entry_id, spec in created.items():
        if entry_id in purged:
            continue  # a one-shot that finished more than a day ago: deleted with its fires
        entry = entries[entry_id]
        recorded = [slot for eid, slot, *_ in fires if eid == entry_id]
        assert len(recorded) == len(set(recorded))
        due = expected_slots(spec, "UTC", clock.now)
        if entry.next_slot is not None and entry.next_due is not None and entry.next_due > clock.now:
            due.discard(stamp(entry.next_slot))
        resumed_late = {slot for eid, slot, status, *_ in fires if eid == entry_id and slot not in due}
        assert set(recorded) - resumed_late == due, (spec, entry.state)
        assert len(resumed_late) <= (0 if entry.recurring else 1)

    # Every fire has one event per attempt, and no two events share (entry, slot, attempt).
    fire_events = events(database, "cron_fire")
    keys = Counter((p["entry_id"], p["slot"], p["attempt"]) for _, _, p in fire_events)
    assert [key for key, count in keys.items() if count > 1] == []
    wanted = {
        (entry_id, slot, attempt)
        for entry_id, slot, status, attempts, _ in fires
        if status in FIRED
        for attempt in range(1, attempts + 1)
    }
    assert {key for key in keys if key[0] not in purged} == wanted
    assert [
        key for _, key, p in fire_events if key != f"fire:{p['entry_id']}:{p['slot']}:{p['attempt']}"
    ] == []

    # Every slot that did not fire is reported by exactly one missed event.
    missed_events = [p for _, _, p in events(database, "cron_missed") if p["entry_id"] not in purged]
    reported = Counter((p["entry_id"], slot) for p in missed_events for slot in p["slots"])
    not_fired = Counter((entry_id, slot) for entry_id, slot, status, *_ in fires if status in NOT_FIRED)
    assert reported == not_fired
    assert sum(p["count"] for p in missed_events) == sum(not_fired.values())
