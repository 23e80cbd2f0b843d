"""Handing recorded fires and missed events to the event log.

Firing a slot commits its fire row as ``pending`` first. Its event is then appended, under a dedupe
key naming the entry, slot and attempt, in the same transaction that marks the row ``delivered``;
missed events wait in an outbox table and leave it the same way. What a crash or a full event log
leaves behind is delivered by ``flush`` on a later tick: nothing is lost and nothing is appended
twice.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from servers.cron.settings import CronSettings
from servers.cron.store import CronEventLog, CronStore, EntryRow, FireRow, Writer, iso
from shared.db import Transaction
from shared.protocol.cron import FIRE_EVENT, MAX_LISTED_SLOTS, MISSED_EVENT, FirePayload, MissedPayload

logger = logging.getLogger("nexo.cron")

Seam = Callable[[str], Awaitable[None]]
"""Called at named points of a fire (tests stop the process there): ``fire:commit`` inside the
transaction that records fires, ``fire:committed`` after it, ``fire:appending`` inside the one that
appends their events, ``missed:appending`` inside the one that appends missed events."""

BATCH = 200
"""Entries fired in one transaction; fire rows delivered per look at the outbox."""


async def no_seam(point: str) -> None:
    return None


@dataclass
class TickReport:
    """What one tick did."""

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


class Delivery:
    """Appends the events of fire rows and missed slots; knows when something may be left over."""

    def __init__(self, store: CronStore, events: CronEventLog, settings: CronSettings, seam: Seam) -> None:
        self.store = store
        self.events = events
        self.settings = settings
        self._seam = seam
        self._undelivered = True
        """Fire rows or missed events may wait for their events (unknown at start)."""

    @asynccontextmanager
    async def recording(self) -> AsyncIterator[None]:
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
        async with self.recording():
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
