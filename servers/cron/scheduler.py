"""The scheduler: sleeps until the next due fire, fires it exactly once, and handles missed slots.

Firing a slot is one transaction (the fire row, unique on (entry, slot), and the entry's next slot),
then its event goes to the event log (``delivery``): a process killed at any instant neither loses a
fire nor makes two. A slot that comes due more than ``misfire_tolerance_s`` late goes through the
entry's misfire policy instead (``misfire``). The next slot only ever moves forward, so a backward
clock step or a repeated local hour cannot fire a slot twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import anyio

from servers.cron.delivery import BATCH, Delivery, Seam, TickReport, missed_payload, no_seam
from servers.cron.errors import StateRefused
from servers.cron.jitter import JitterKnobs, due_at, expired_by_age
from servers.cron.misfire import Overdue, misfired, overdue_slots, plan_misfire
from servers.cron.outcomes import report_outcome
from servers.cron.rows import new_fire
from servers.cron.settings import CronSettings
from servers.cron.store import Clock, CronEventLog, CronStore, EntryRow, FireRow, Writer
from shared.db import StorageFull
from shared.protocol.cron import FINISHED_STATES

__all__ = ["Scheduler", "Seam", "TickReport", "Wait", "no_seam", "sleep_or_wake"]

logger = logging.getLogger("nexo.cron")

Wait = Callable[[anyio.Event, float], Awaitable[None]]
"""(woken, seconds): return when ``woken`` is set or the seconds have passed."""

MAINTENANCE_EVERY = timedelta(seconds=60)
FULL_LOG_RECHECK_S = 5.0
FULL_DISK_RETRY_S = 30.0
"""How soon a tick that found the disk full is tried again (a wake tries sooner)."""
"""How soon fires held back by a full event log are tried again."""
ONE_MICROSECOND = timedelta(microseconds=1)


async def sleep_or_wake(woken: anyio.Event, timeout: float) -> None:
    with anyio.move_on_after(timeout):
        await woken.wait()


class Scheduler:
    """Owns every time computation on entries; ``tick(now)`` does one pass, ``run`` loops over it."""

    def __init__(
        self,
        store: CronStore,
        events: CronEventLog,
        settings: CronSettings,
        knobs: JitterKnobs,
        *,
        clock: Clock,
        wait: Wait = sleep_or_wake,
        monotonic: Callable[[], float] = time.monotonic,
        seam: Seam = no_seam,
    ) -> None:
        self.store = store
        self.events = events
        self.delivery = Delivery(store, events, settings, seam)
        self.settings = settings
        self.knobs = knobs
        self.clock = clock
        self._wait = wait
        self._monotonic = monotonic
        self._seam = seam
        self._woken = anyio.Event()
        self._last_maintenance: datetime | None = None
        self._tolerance = timedelta(seconds=settings.misfire_tolerance_s)

    # -- the loop --------------------------------------------------------------------------------

    def wake(self) -> None:
        """Look at the schedule again now (an entry was created, resumed or rescheduled)."""
        self._woken.set()

    async def flush(self, report: TickReport) -> None:
        """Deliver fire rows still pending and missed events still in the outbox."""
        await self.delivery.flush(report)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Tick, sleep until the next due time (at most ``max_sleep_s``) or a wake, repeat."""
        task_status.started()
        previous: tuple[datetime, float] | None = None
        while True:
            if self._woken.is_set():
                self._woken = anyio.Event()
            woken = self._woken
            now, mono = self.clock(), self._monotonic()
            if previous is not None:
                self._notice_clock_step(now - previous[0], mono - previous[1])
            previous = (now, mono)
            try:
                report = await self.tick(now)
            except StorageFull:
                # The tick's transaction was rolled back, so what was due stays due; the storage
                # layer has logged the condition, and `nexo status` shows it.
                await self._wait(woken, min(FULL_DISK_RETRY_S, self.settings.max_sleep_s))
                continue
            await self._wait(woken, self.sleep_s(report))

    def sleep_s(self, report: TickReport) -> float:
        if report.next_wake is None:
            return self.settings.max_sleep_s
        delay = (report.next_wake - self.clock()).total_seconds()
        return min(max(delay, 0.0), self.settings.max_sleep_s)

    def _notice_clock_step(self, wall: timedelta, mono_s: float) -> None:
        step = wall.total_seconds() - mono_s
        if step > self.settings.misfire_tolerance_s:
            logger.warning(
                "the wall clock jumped %.0f s forward; overdue entries follow their misfire policy", step
            )
        elif step < -self.settings.misfire_tolerance_s:
            logger.warning(
                "the wall clock stepped %.0f s back; no slot fires twice, the next ones wait", -step
            )

    async def tick(self, now: datetime | None = None) -> TickReport:
        """One pass at ``now``: deliver what is recorded, retry, fire what is due, tidy up."""
        report = TickReport(now=self.clock() if now is None else now)
        await self.flush(report)
        next_retry = await self.store.earliest_retry()
        if next_retry is not None and next_retry <= report.now:
            await self._retry_due(report)
            next_retry = await self.store.earliest_retry()
        await self._fire_due(report)
        await self._maintain(report)
        wakes = [t for t in (await self.store.earliest_due(), next_retry) if t is not None]
        if report.backlog:
            wakes.append(report.now + timedelta(seconds=FULL_LOG_RECHECK_S))
        report.next_wake = min(wakes, default=None)
        return report

    # -- due times -------------------------------------------------------------------------------

    def due(self, entry: EntryRow, slot: datetime) -> datetime:
        """The slot moved by the entry's jitter, never before the entry was created."""
        return max(due_at(entry.id, entry.schedule, slot, self.knobs), entry.created_at)

    def following(self, entry: EntryRow, slot: datetime) -> tuple[datetime | None, datetime | None]:
        """The entry's slot after ``slot`` and its due time; (None, None) for a one-shot."""
        if not entry.recurring:
            return None, None
        nxt = entry.schedule.next_after(slot)
        return (nxt, self.due(entry, nxt)) if nxt is not None else (None, None)

    async def overdue(self, entry: EntryRow, now: datetime) -> Overdue:
        """Every slot from the entry's next one whose due time is at or before ``now``."""
        return await overdue_slots(entry, now, self.due, self.settings.max_missed_rows)

    # -- firing ----------------------------------------------------------------------------------

    async def _fire_due(self, report: TickReport) -> None:
        now = report.now
        while True:
            due = await self.store.due_entries(now, BATCH)
            on_time = [entry for entry in due if not misfired(entry, now, self._tolerance)]
            again = await self._fire_on_time(on_time, report) if on_time else False
            for entry in due:
                if misfired(entry, now, self._tolerance):
                    await self._misfire(entry, report)
            if len(due) < BATCH and not again:
                return

    async def _fire_on_time(self, entries: Sequence[EntryRow], report: TickReport) -> bool:
        """Fire each entry's next slot in one transaction; True when a new next slot is due already."""
        now = report.now
        fired: list[tuple[FireRow, EntryRow]] = []
        again = False
        async with self.delivery.recording():
            async with self.store.writing() as w:
                for entry in entries:
                    assert entry.next_slot is not None
                    assert entry.next_due is not None
                    slot, due = entry.next_slot, entry.next_due
                    nxt, nxt_due = self.following(entry, slot)
                    if not await w.advance(entry.id, slot, nxt, nxt_due):
                        continue  # paused, dropped or rescheduled since it was read
                    again = again or (nxt_due is not None and nxt_due <= now)
                    if await self._busy(w, entry, now):
                        await self._record_overlap(w, entry, [(slot, due)], report)
                        continue
                    fire_id = await w.insert_fire(
                        entry.id, slot, due, status="pending", reason="schedule", now=now
                    )
                    if fire_id is not None:
                        fired.append((new_fire(fire_id, entry, slot, due, now), entry))
                await self._seam("fire:commit")
            await self._seam("fire:committed")
            report.fired.extend(await self.delivery.deliver(fired, report))
            await self.delivery.flush_outbox(report)
        return again

    async def _busy(self, w: Writer, entry: EntryRow, now: datetime) -> bool:
        """Whether overlap ``skip`` holds this recurring entry's slot back: its last fire is still out."""
        if not entry.recurring or entry.overlap != "skip":
            return False
        return await w.has_open_fire(entry.id, now - timedelta(seconds=self.settings.overlap_timeout_s))

    async def _record_overlap(
        self, w: Writer, entry: EntryRow, slots: Sequence[tuple[datetime, datetime]], report: TickReport
    ) -> None:
        await w.insert_missed(entry.id, slots, status="skipped_overlap", reason="overlap", now=report.now)
        payload = missed_payload(entry, [slot for slot, _ in slots], len(slots), "overlap")
        await w.add_outbox(payload.model_dump(mode="json"), report.now)
        report.skipped_overlap += len(slots)

    async def _misfire(self, entry: EntryRow, report: TickReport) -> None:
        """Apply the entry's misfire policy to every slot that came due too long ago."""
        now = report.now
        plan = plan_misfire(entry, await self.overdue(entry, now), now)
        to_fire = plan.to_fire
        fired: list[tuple[FireRow, EntryRow]] = []
        async with self.delivery.recording():
            async with self.store.writing() as w:
                if not await w.advance(
                    entry.id, entry.next_slot, plan.next_slot, plan.next_due, **plan.changes
                ):
                    return
                if plan.missed:
                    await w.insert_missed(entry.id, plan.missed, status="missed", reason="downtime", now=now)
                    slots = [slot for slot, _ in plan.missed]
                    payload = missed_payload(entry, slots, plan.missed_count, "downtime", parked=plan.parks)
                    await w.add_outbox(payload.model_dump(mode="json"), now)
                    report.missed += plan.missed_count
                if to_fire and await self._busy(w, entry, now):
                    await self._record_overlap(w, entry, to_fire, report)
                    to_fire = []
                for slot, due in to_fire:
                    fire_id = await w.insert_fire(
                        entry.id, slot, due, status="pending", reason="catch_up", now=now
                    )
                    if fire_id is not None:
                        fired.append((new_fire(fire_id, entry, slot, due, now, reason="catch_up"), entry))
                await self._seam("fire:commit")
            await self._seam("fire:committed")
            report.fired.extend(await self.delivery.deliver(fired, report))
            await self.delivery.flush_outbox(report)
        if plan.parks:
            report.parked.append(entry.id)
            logger.warning(
                "cron entry %s is parked after %d missed slot(s); resume it", entry.id, plan.missed_count
            )
        if plan.expires:
            report.expired.append(entry.id)

    async def _retry_due(self, report: TickReport) -> None:
        """Deliver the next attempt of every failed one-shot whose backoff has passed."""
        while True:
            due = await self.store.retries_due(report.now, BATCH)
            started: list[tuple[FireRow, EntryRow]] = []
            async with self.delivery.recording():
                async with self.store.writing() as w:
                    for fire in due:
                        entry = await w.entry(fire.entry_id)
                        assert fire.retry_at is not None
                        if entry is not None and await w.start_retry(fire.id, fire.retry_at):
                            retry = new_fire(
                                fire.id, entry, fire.slot, fire.retry_at, fire.created_at,
                                attempt=fire.attempt + 1, manual=fire.manual, reason=fire.reason,
                            )  # fmt: skip
                            started.append((retry, entry))
                    await self._seam("fire:commit")
                await self._seam("fire:committed")
                report.fired.extend(await self.delivery.deliver(started, report))
            if report.backlog or len(due) < BATCH:
                return

    # -- operations on one entry -----------------------------------------------------------------

    async def resume(self, entry: EntryRow) -> None:
        """Make a paused or parked entry active from its next slot after now.

        Slots that came due while it was parked are recorded as missed (reason ``parked``); a
        paused entry skips them silently (pausing was asked for). A one-shot whose time has passed
        fires once now.
        """
        now = self.clock()
        report = TickReport(now=now)
        fired: list[tuple[FireRow, EntryRow]] = []
        overdue = await self.overdue(entry, now)
        changes: dict[str, Any] = {"state": "active"}
        if entry.recurring and overdue.count and overdue.next_slot is None:
            changes.update(state="done", finished_at=now)
        async with self.delivery.recording():
            async with self.store.writing() as w:
                moved = await w.advance(
                    entry.id, entry.next_slot, overdue.next_slot, overdue.next_due,
                    from_states=("paused", "parked"), **changes,
                )  # fmt: skip
                if not moved:
                    raise StateRefused(
                        f"cron entry {entry.id!r} changed while it was resumed; resume it again"
                    )
                if not entry.recurring and overdue.count:
                    fired.append((await self._insert_now(w, entry, entry.next_slot, "resumed", now), entry))
                elif overdue.count and entry.state == "parked":
                    await w.insert_missed(entry.id, overdue.recent, status="missed", reason="parked", now=now)
                    slots = [slot for slot, _ in overdue.recent]
                    payload = missed_payload(entry, slots, overdue.count, "parked")
                    await w.add_outbox(payload.model_dump(mode="json"), now)
            await self.delivery.deliver(fired, report)
            await self.delivery.flush_outbox(report)
        self.wake()

    async def _insert_now(
        self, w: Writer, entry: EntryRow, slot: datetime | None, reason: str, now: datetime
    ) -> FireRow:
        """A fire due now, on ``slot`` if that is free, else on this instant (a microsecond later
        each time it is taken: a manual fire never collides with another row)."""
        at = slot or now
        manual = reason == "manual"
        while (
            fire_id := await w.insert_fire(
                entry.id, at, now, status="pending", reason=reason, now=now, manual=manual
            )
        ) is None:
            at = now if at < now else at + ONE_MICROSECOND
        return new_fire(fire_id, entry, at, now, now, reason=reason, manual=manual)

    async def fire_now(self, entry: EntryRow) -> FireRow:
        """A manual fire at this instant: its own slot, no jitter, no gap or overlap rule."""
        if entry.state in FINISHED_STATES:
            raise StateRefused(
                f"cron entry {entry.id!r} is {entry.state}; it cannot fire again. Create a new entry instead"
            )
        now = self.clock()
        async with self.delivery.recording():
            async with self.store.writing() as w:
                fire = await self._insert_now(w, entry, None, "manual", now)
            await self.delivery.deliver([(fire, entry)], TickReport(now=now))
        stored = await self.store.fire(fire.id)
        assert stored is not None
        return stored

    async def report_outcome(
        self, fire_id: int, outcome: str, *, error: str | None, attempt: int | None
    ) -> tuple[FireRow, EntryRow]:
        """Record how a fire ended (see ``outcomes``) and look at the schedule again."""
        now = self.clock()
        ended = await report_outcome(
            self.store, self.settings, fire_id, outcome, error=error, attempt=attempt, now=now
        )
        self.wake()
        return ended

    async def reschedule(self) -> int:
        """Compute every unfinished entry's next due time again (after a jitter change)."""
        changes = [
            (self.due(entry, entry.next_slot), entry.id)
            for entry in await self.store.entries(include_finished=False)
            if entry.next_slot is not None
        ]
        await self.store.set_due(changes)
        self.wake()
        return len(changes)

    # -- maintenance -----------------------------------------------------------------------------

    async def _maintain(self, report: TickReport) -> None:
        """Once a minute (and after the clock went back): expire entries past their maximum age,
        purge finished one-shots and old history."""
        now, last = report.now, self._last_maintenance
        if last is not None and last <= now < last + MAINTENANCE_EVERY:
            return
        self._last_maintenance = now
        expired = [
            entry
            for entry in (await self.store.unfinished_entries() if self.knobs.recurring_max_age_ms else [])
            if expired_by_age(entry.created_at, now, self.knobs, recurring=entry.recurring, permanent=False)
        ]
        if expired:
            async with self.store.writing() as w:
                for entry in expired:
                    await w.update_entry(entry.id, state="expired", finished_at=now, next_due=None)
            report.expired.extend(entry.id for entry in expired)
            logger.info("cron entries expired by age: %s", ", ".join(entry.id for entry in expired))
        settings = self.settings
        report.purged = await self.store.purge(
            done_before=now - timedelta(seconds=settings.purge_after_s),
            history_before=now - timedelta(seconds=settings.history_s),
        )
        await self.events.purge_acked(settings.history_s)
