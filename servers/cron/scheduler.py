"""The scheduler: sleeps until the next due fire, fires it exactly once, and handles missed slots.

Firing a slot is one transaction (the fire row, unique on (entry, slot), and the entry's next slot),
then an append to the event log whose dedupe key names the entry, slot and attempt, then the row is
marked delivered. A fire row still ``pending`` gets its event appended again on the next tick (at
start, the first one): a process killed at any instant neither loses a fire nor makes two.

A slot that comes due more than ``misfire_tolerance_s`` late (the server was down, the wall clock
jumped forward, the process was stopped) goes through the entry's misfire policy instead. The next
slot only ever moves forward, so a backward clock step or a repeated local hour cannot fire a slot
twice.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel

from servers.cron.errors import EntryNotFound, FireNotFound, StateRefused
from servers.cron.jitter import JitterKnobs, due_at, expired_by_age
from servers.cron.settings import CronSettings
from servers.cron.store import Clock, CronEventLog, CronStore, EntryRow, FireRow, Writer, iso
from shared.db import Transaction
from shared.protocol.cron import (
    FINISHED_STATES,
    FIRE_EVENT,
    MAX_LISTED_SLOTS,
    MISSED_EVENT,
    FirePayload,
    MissedPayload,
)

logger = logging.getLogger("nexo.cron")

Wait = Callable[[anyio.Event, float], Awaitable[None]]
"""(woken, seconds): return when ``woken`` is set or the seconds have passed."""
Seam = Callable[[str], Awaitable[None]]
"""Called at named points of a fire (tests stop the process there): ``fire:commit`` inside the
transaction that records fires, ``fire:committed`` after it, ``fire:appending`` inside the one that
appends their events, ``missed:appending`` inside the one that appends missed events."""

BATCH = 200
"""Entries fired in one transaction; fire rows delivered per look at the outbox."""
SLOT_CHUNK = 1_000
MAINTENANCE_EVERY = timedelta(seconds=60)
FULL_LOG_RECHECK_S = 5.0
"""How soon fires held back by a full event log are tried again."""
ONE_MICROSECOND = timedelta(microseconds=1)


async def sleep_or_wake(woken: anyio.Event, timeout: float) -> None:
    with anyio.move_on_after(timeout):
        await woken.wait()


async def no_seam(point: str) -> None:
    return None


def fire_dedupe_key(entry_id: str, slot: datetime, attempt: int) -> str:
    return f"fire:{entry_id}:{iso(slot)}:{attempt}"


def fire_payload(fire: FireRow, entry: EntryRow) -> FirePayload:
    return FirePayload(
        fire_id=fire.id,
        entry_id=entry.id,
        kind=entry.kind,
        binding=entry.binding,
        agent=entry.agent,
        provider=entry.provider,
        model=entry.model,
        text=entry.text,
        channel=entry.channel,
        recipient=entry.recipient,
        schedule=entry.spec,
        timezone=entry.timezone,
        slot=iso(fire.slot),
        due_at=iso(fire.due_at),
        attempt=fire.attempt,
        manual=fire.manual,
        reason=fire.reason,
    )


def missed_payload(
    entry: EntryRow, slots: Sequence[datetime], count: int, reason: str, *, parked: bool = False
) -> MissedPayload:
    return MissedPayload(
        entry_id=entry.id,
        binding=entry.binding,
        agent=entry.agent,
        kind=entry.kind,
        reason=reason,
        slots=[iso(slot) for slot in slots[-MAX_LISTED_SLOTS:]],
        count=count,
        parked=parked,
    )


def new_fire(
    fire_id: int,
    entry: EntryRow,
    slot: datetime,
    due: datetime,
    now: datetime,
    *,
    reason: str = "schedule",
    attempt: int = 1,
    manual: bool = False,
) -> FireRow:
    """The row just recorded, as ``pending``, without reading it back."""
    return FireRow(
        id=fire_id,
        entry_id=entry.id,
        slot=slot,
        due_at=due,
        status="pending",
        attempt=attempt,
        manual=manual,
        reason=reason,
        error=None,
        created_at=now,
        finished_at=None,
        retry_at=None,
    )


def effective_misfire(entry: EntryRow) -> str:
    """Config-owned entries are never parked: they skip what they missed."""
    return "skip" if entry.permanent and entry.misfire == "park" else entry.misfire


@dataclass
class Overdue:
    """The slots of one entry whose due time has passed, from its next slot on."""

    count: int
    recent: list[tuple[datetime, datetime]]
    """The newest (slot, due) pairs, oldest first, at most ``max_missed_rows``."""
    next_slot: datetime | None
    next_due: datetime | None


@dataclass
class TickReport:
    now: datetime
    fired: list[int] = field(default_factory=list)
    """Fire rows recorded and handed to the event log this tick (scheduled, catch-up and retries)."""
    redelivered: int = 0
    """Fires recorded before this tick whose events were appended now (after a crash or a full log)."""
    missed: int = 0
    skipped_overlap: int = 0
    parked: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    purged: int = 0
    backlog: bool = False
    """The event log was full: some fires wait in the database."""
    next_wake: datetime | None = None
    """The earliest due or retry time left after this tick."""


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
        self.settings = settings
        self.knobs = knobs
        self.clock = clock
        self._wait = wait
        self._monotonic = monotonic
        self._seam = seam
        self._woken = anyio.Event()
        self._last_maintenance: datetime | None = None
        self._tolerance = timedelta(seconds=settings.misfire_tolerance_s)
        self._undelivered = True
        """Fire rows or missed events may wait for their events (unknown at start)."""

    # -- the loop --------------------------------------------------------------------------------

    def wake(self) -> None:
        """Look at the schedule again now (an entry was created, resumed or rescheduled)."""
        self._woken.set()

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
            report = await self.tick(now)
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
        recent: deque[tuple[datetime, datetime]] = deque(maxlen=self.settings.max_missed_rows)
        count = 0
        batch = [] if entry.next_slot is None else [entry.next_slot]
        while batch:
            for slot in batch:
                due = self.due(entry, slot)
                if due > now:
                    return Overdue(count, list(recent), slot, due)
                count += 1
                recent.append((slot, due))
            if not entry.recurring:
                break
            last = batch[-1]
            batch = entry.schedule.slots_between(last, now, SLOT_CHUNK)
            if not batch:
                nxt = entry.schedule.next_after(last)
                batch = [] if nxt is None else [nxt]
            await anyio.lowlevel.checkpoint()
        return Overdue(count, list(recent), None, None)

    # -- delivery --------------------------------------------------------------------------------

    @asynccontextmanager
    async def _recording(self) -> AsyncIterator[None]:
        """Around a commit of fire rows or missed events and their delivery: if the delivery does
        not finish, the next tick looks for what is left."""
        try:
            yield
        except BaseException:
            self._undelivered = True
            raise

    async def deliver(self, fires: Sequence[tuple[FireRow, EntryRow]], report: TickReport) -> list[int]:
        """Append the fires' events (idempotent on their dedupe keys) and mark the rows delivered,
        in one transaction. Returns the ids delivered: fewer than given when the log is full."""
        if not fires:
            return []
        ids = [fire.id for fire, _ in fires]
        items = [
            (
                fire_dedupe_key(entry.id, fire.slot, fire.attempt),
                fire_payload(fire, entry).model_dump(mode="json"),
            )
            for fire, entry in fires
        ]

        async def delivered(tx: Transaction, count: int) -> None:
            await Writer(tx).mark_delivered(ids[:count])
            await self._seam("fire:appending")

        count = await self.events.append_batch(FIRE_EVENT, items, then=delivered)
        if count < len(fires):
            self._held_back(report, len(fires) - count, "fires")
        return ids[:count]

    def _held_back(self, report: TickReport, count: int, what: str) -> None:
        report.backlog = self._undelivered = True
        logger.warning(
            "%d cron %s wait in the database: %d events wait for the orchestrator (is `nexo run` "
            "running?); raise NEXO_CRON_MAX_PENDING_EVENTS to queue more",
            count,
            what,
            self.settings.max_pending_events,
        )

    async def flush(self, report: TickReport) -> None:
        """Deliver fire rows still pending and missed events still in the outbox."""
        if not self._undelivered:
            return
        self._undelivered = False
        async with self._recording():
            while not report.backlog:
                pending = await self.store.pending_fires(BATCH)
                pairs = [
                    (fire, entry) for fire in pending if (entry := await self.store.entry(fire.entry_id))
                ]
                report.redelivered += len(await self.deliver(pairs, report))
                if len(pending) < BATCH:
                    break
            await self.flush_outbox(report)

    async def flush_outbox(self, report: TickReport) -> None:
        while not report.backlog:
            batch = await self.store.outbox(BATCH)
            if batch:
                await self._send_missed(batch, report)
            if len(batch) < BATCH:
                return

    async def _send_missed(self, batch: Sequence[tuple[int, dict[str, Any]]], report: TickReport) -> None:
        ids = [outbox_id for outbox_id, _ in batch]

        async def sent(tx: Transaction, count: int) -> None:
            await Writer(tx).drop_outbox(ids[:count])
            await self._seam("missed:appending")

        items = [(f"missed:{outbox_id}", payload) for outbox_id, payload in batch]
        count = await self.events.append_batch(MISSED_EVENT, items, then=sent)
        if count < len(batch):
            self._held_back(report, len(batch) - count, "missed events")

    # -- firing ----------------------------------------------------------------------------------

    async def _fire_due(self, report: TickReport) -> None:
        now = report.now
        while True:
            due = await self.store.due_entries(now, BATCH)
            on_time = [entry for entry in due if not self._misfired(entry, now)]
            again = await self._fire_on_time(on_time, report) if on_time else False
            for entry in due:
                if self._misfired(entry, now):
                    await self._misfire(entry, report)
            if len(due) < BATCH and not again:
                return

    def _misfired(self, entry: EntryRow, now: datetime) -> bool:
        assert entry.next_slot is not None
        assert entry.next_due is not None
        # A one-shot moved early by its jitter is not late before its slot.
        return now - max(entry.next_due, entry.next_slot) > self._tolerance

    async def _fire_on_time(self, entries: Sequence[EntryRow], report: TickReport) -> bool:
        """Fire each entry's next slot in one transaction; True when a new next slot is due already."""
        now = report.now
        fired: list[tuple[FireRow, EntryRow]] = []
        again = False
        async with self._recording():
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
            report.fired.extend(await self.deliver(fired, report))
            await self.flush_outbox(report)
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
        overdue = await self.overdue(entry, now)
        policy = effective_misfire(entry)
        to_fire: list[tuple[datetime, datetime]] = []
        if policy == "catch_up_once":
            to_fire = overdue.recent[-1:]
        elif policy == "all":
            oldest = now - timedelta(seconds=entry.grace_s)
            to_fire = [(slot, due) for slot, due in overdue.recent if slot >= oldest]
        missed = overdue.recent[: len(overdue.recent) - len(to_fire)]
        missed_count = overdue.count - len(to_fire)
        next_slot, next_due = overdue.next_slot, overdue.next_due
        changes: dict[str, Any] = {}
        if policy == "park":
            changes["state"] = "parked"
            if not entry.recurring:
                next_slot, next_due = entry.next_slot, entry.next_due  # resuming fires it late
        elif next_slot is None and not to_fire:
            changes.update(state="expired", finished_at=now)
        fired: list[tuple[FireRow, EntryRow]] = []
        async with self._recording():
            async with self.store.writing() as w:
                if not await w.advance(entry.id, entry.next_slot, next_slot, next_due, **changes):
                    return
                if missed:
                    await w.insert_missed(entry.id, missed, status="missed", reason="downtime", now=now)
                    slots = [slot for slot, _ in missed]
                    payload = missed_payload(entry, slots, missed_count, "downtime", parked=policy == "park")
                    await w.add_outbox(payload.model_dump(mode="json"), now)
                    report.missed += missed_count
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
            report.fired.extend(await self.deliver(fired, report))
            await self.flush_outbox(report)
        if policy == "park":
            report.parked.append(entry.id)
            logger.warning(
                "cron entry %s is parked after %d missed slot(s); resume it", entry.id, missed_count
            )
        if changes.get("state") == "expired":
            report.expired.append(entry.id)

    async def _retry_due(self, report: TickReport) -> None:
        """Deliver the next attempt of every failed one-shot whose backoff has passed."""
        while True:
            due = await self.store.retries_due(report.now, BATCH)
            started: list[tuple[FireRow, EntryRow]] = []
            async with self._recording():
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
                report.fired.extend(await self.deliver(started, report))
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
        async with self._recording():
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
            await self.deliver(fired, report)
            await self.flush_outbox(report)
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
        async with self._recording():
            async with self.store.writing() as w:
                fire = await self._insert_now(w, entry, None, "manual", now)
            await self.deliver([(fire, entry)], TickReport(now=now))
        stored = await self.store.fire(fire.id)
        assert stored is not None
        return stored

    async def report_outcome(
        self, fire_id: int, outcome: str, *, error: str | None, attempt: int | None
    ) -> tuple[FireRow, EntryRow]:
        """Record how a fire ended. A failed one-shot is retried with exponential backoff until
        ``retry_max_attempts``; a repeated or stale report changes nothing."""
        now = self.clock()
        async with self.store.writing() as w:
            fire = await w.fire(fire_id)
            if fire is None:
                raise FireNotFound(
                    f"no cron fire has id {fire_id!r}; take fire_id from the cron_fire event, "
                    "or list recent ones with nexo/cron/fires"
                )
            entry = await w.entry(fire.entry_id)
            assert entry is not None  # fires go with their entry
            if fire.status in ("pending", "delivered") and (attempt is None or attempt == fire.attempt):
                await self._record_outcome(w, fire, entry, outcome, error, now)
            after, entry_after = await w.fire(fire_id), await w.entry(fire.entry_id)
        self.wake()
        assert after is not None
        assert entry_after is not None
        return after, entry_after

    async def _record_outcome(
        self, w: Writer, fire: FireRow, entry: EntryRow, outcome: str, error: str | None, now: datetime
    ) -> None:
        settings = self.settings
        one_shot = not entry.recurring and not fire.manual
        unfinished = entry.state not in FINISHED_STATES
        if outcome == "failed" and one_shot and unfinished and fire.attempt < settings.retry_max_attempts:
            delay = min(settings.retry_cap_s, settings.retry_base_s * 2 ** (fire.attempt - 1))
            await w.schedule_retry(fire.id, error=error, retry_at=now + timedelta(seconds=delay))
            return
        await w.end_fire(fire.id, outcome, error=error, now=now)
        if not fire.manual and unfinished and entry.next_slot is None:
            # The entry's last slot has ended: a one-shot, or a schedule with no more slots.
            state = "failed" if outcome == "failed" else "done"
            await w.update_entry(entry.id, state=state, finished_at=now, next_due=None)

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


def require_entry(entry: EntryRow | None, entry_id: str, binding: str | None) -> EntryRow:
    """The entry, if the caller may see it (its binding, or any binding for the operator)."""
    if entry is None or (binding is not None and entry.binding != binding):
        raise EntryNotFound(
            f"no cron entry {entry_id!r}"
            + (f" in binding {binding!r}" if binding is not None else "")
            + "; list the entries with cron_list (or nexo/cron/list) and use one of their ids"
        )
    return entry
