"""What the cron server holds while it runs (database, event log, scheduler) and the operations on
entries that its tools and control methods share. How entries are checked, built and shown is in
``entries``; time logic is in the scheduler."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import anyio
from pydantic import ValidationError

from servers.cron.entries import (
    checked_address,
    checked_schedule,
    checked_text,
    entry_model,
    fire_model,
    misfire_policy,
    poller_changes,
    poller_entry,
    requested_schedule,
    require_entry,
)
from servers.cron.errors import InvalidRequest, LimitReached, OwnedByConfig, StateRefused
from servers.cron.jitter import JitterKnobs
from servers.cron.schedule import Schedule
from servers.cron.scheduler import Scheduler, Seam, TickReport, Wait, no_seam, sleep_or_wake
from servers.cron.settings import CronSettings
from servers.cron.store import (
    Clock,
    CronEventLog,
    CronStore,
    EntryRow,
    FireRow,
    new_entry_id,
    open_database,
    utc_now,
)
from shared.protocol.cron import (
    DEFAULT_AGENT,
    DEFAULT_BINDING,
    FINISHED_STATES,
    Entry,
    Fire,
    PollerSpec,
    poller_id,
)

__all__ = ["Caller", "CronState", "SyncOutcome", "effective_knobs", "entry_model", "fire_model", "open_state"]

logger = logging.getLogger("nexo.cron")

JITTER_KEY = "jitter"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a tool call acts for, from the request's ``_meta``."""

    binding: str = DEFAULT_BINDING
    agent: str = DEFAULT_AGENT
    provider: str | None = None
    model: str | None = None


@dataclass(slots=True)
class SyncOutcome:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


class CronState:
    """The entries of every binding and the operations on them; time logic lives in the scheduler."""

    def __init__(
        self,
        settings: CronSettings,
        store: CronStore,
        events: CronEventLog,
        scheduler: Scheduler,
        overrides: Mapping[str, Any],
    ) -> None:
        self.settings = settings
        self.store = store
        self.events = events
        self.scheduler = scheduler
        self._overrides = dict(overrides)

    @property
    def clock(self) -> Clock:
        return self.scheduler.clock

    @property
    def knobs(self) -> JitterKnobs:
        return self.scheduler.knobs

    async def tick(self, now: datetime | None = None) -> TickReport:
        return await self.scheduler.tick(now)

    # -- creating --------------------------------------------------------------------------------

    async def create(
        self,
        caller: Caller,
        *,
        kind: str,
        schedule: str,
        text: str,
        channel: str | None = None,
        recipient: str | None = None,
        recurring: bool = True,
        misfire: str | None = None,
        timezone: str | None = None,
        one_shot_only: bool = False,
    ) -> EntryRow:
        """A new entry of ``caller``'s binding, pinned to its provider and model."""
        now = self.clock()
        parsed = requested_schedule(
            schedule, timezone or self.settings.default_timezone, now, one_shot_only=one_shot_only
        )
        slot = parsed.next_after(now)
        if slot is None:
            raise InvalidRequest(f"schedule {parsed.spec!r} has no slot after now; give a future time")
        entry = EntryRow(
            id=new_entry_id(),
            binding=caller.binding,
            agent=caller.agent,
            kind=kind,
            schedule_kind=parsed.kind,
            spec=parsed.spec,
            timezone=parsed.timezone,
            anchor=parsed.anchor,
            recurring=parsed.recurring and recurring,
            text=checked_text(text, "reminder text" if kind == "reminder" else "prompt"),
            channel=checked_address(channel, "channel"),
            recipient=checked_address(recipient, "recipient"),
            provider=caller.provider,
            model=caller.model,
            misfire=misfire_policy(misfire, permanent=False),
            grace_s=self.settings.default_grace_s,
            overlap="skip",
            permanent=False,
            state="active",
            next_slot=slot,
            next_due=None,
            created_at=now,
            finished_at=None,
        )
        entry = replace(entry, next_due=self.scheduler.due(entry, slot))
        limit = self.settings.max_entries_per_binding
        async with self.store.writing() as w:
            if await w.count_unfinished(caller.binding) >= limit:
                raise LimitReached(
                    f"binding {caller.binding!r} already has {limit} unfinished cron entries, the limit "
                    "(NEXO_CRON_MAX_ENTRIES_PER_BINDING); delete some with cron_delete first"
                )
            await w.insert_entry(entry)
        self.scheduler.wake()
        return entry

    # -- reading ---------------------------------------------------------------------------------

    async def get(self, entry_id: str, binding: str | None = None) -> EntryRow:
        return require_entry(await self.store.entry(entry_id), entry_id, binding)

    async def entries(self, binding: str | None = None, include_finished: bool = False) -> list[Entry]:
        rows = await self.store.entries(binding=binding, include_finished=include_finished)
        last = await self.store.last_statuses([row.id for row in rows])
        return [entry_model(row, last.get(row.id)) for row in rows]

    async def view(self, entry: EntryRow) -> Entry:
        last = await self.store.last_statuses([entry.id])
        return entry_model(entry, last.get(entry.id))

    async def fires(self, entry_id: str | None, since: datetime | None, limit: int) -> list[Fire]:
        return [
            fire_model(fire) for fire in await self.store.fires(entry_id=entry_id, since=since, limit=limit)
        ]

    # -- changing --------------------------------------------------------------------------------

    def _guard(self, entry: EntryRow, from_tool: bool, action: str) -> None:
        if from_tool and entry.permanent:
            raise OwnedByConfig(
                f"cron entry {entry.id!r} is a poller owned by the configuration; {action} it by "
                "changing the agent's pollers in the config (or ask the operator to use `nexo cron`)"
            )
        if entry.state in FINISHED_STATES:
            raise StateRefused(
                f"cron entry {entry.id!r} is {entry.state}; there is nothing to {action}. "
                "Create a new entry instead"
            )

    async def pause(self, entry_id: str, binding: str | None = None, *, from_tool: bool = False) -> EntryRow:
        entry = await self.get(entry_id, binding)
        self._guard(entry, from_tool, "pause")
        if entry.state != "paused":
            async with self.store.writing() as w:
                await w.update_entry(entry.id, state="paused")
        return await self.get(entry_id)

    async def resume(self, entry_id: str, binding: str | None = None, *, from_tool: bool = False) -> EntryRow:
        entry = await self.get(entry_id, binding)
        self._guard(entry, from_tool, "resume")
        if entry.state != "active":
            await self.scheduler.resume(entry)
        return await self.get(entry_id)

    async def drop(self, entry_id: str, binding: str | None = None, *, from_tool: bool = False) -> bool:
        entry = await self.get(entry_id, binding)
        if from_tool and entry.permanent:
            self._guard(entry, from_tool, "delete")
        async with self.store.writing() as w:
            return await w.delete_entry(entry.id)

    async def fire(self, entry_id: str) -> FireRow:
        return await self.scheduler.fire_now(await self.get(entry_id))

    async def report(
        self, fire_id: int, outcome: str, *, error: str | None = None, attempt: int | None = None
    ) -> tuple[FireRow, EntryRow]:
        return await self.scheduler.report_outcome(fire_id, outcome, error=error, attempt=attempt)

    # -- configuration ---------------------------------------------------------------------------

    async def configure(self, jitter: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """Change jitter knobs at run time; kept in the database, applied to every due time from now."""
        overrides = {**self._overrides, **jitter}
        knobs = effective_knobs(self.settings, overrides)
        async with self.store.writing() as w:
            await w.set_config(JITTER_KEY, overrides)
        self._overrides = overrides
        self.scheduler.knobs = knobs
        rescheduled = await self.scheduler.reschedule()
        return knobs.model_dump(mode="json"), rescheduled

    async def sync_pollers(
        self, binding: str, agent: str, pollers: Sequence[PollerSpec], *, dry_run: bool = False
    ) -> SyncOutcome:
        """Make the binding's config-owned pollers exactly the valid ones of ``pollers``: upsert them,
        delete the rest. A poller whose schedule is refused is reported and does not stop the others."""
        now = self.clock()
        names = [poller.name for poller in pollers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise InvalidRequest(f"poller names repeat: {', '.join(repeated)}; give each poller its own name")
        parsed: dict[str, Schedule] = {}
        outcome = SyncOutcome()
        for poller in pollers:
            try:
                schedule = checked_schedule(poller.schedule, poller.timezone, now)
            except InvalidRequest as exc:
                outcome.refused[poller.name] = str(exc)
                continue
            if not schedule.recurring:
                outcome.refused[poller.name] = (
                    f"{poller.schedule!r} fires once; pollers repeat, e.g. 'every 15m' or '*/30 * * * *'"
                )
                continue
            parsed[poller.name] = schedule
        if dry_run:
            return outcome
        async with self.store.writing() as w:
            existing = {entry.id: entry for entry in await w.entries_with_prefix(poller_id(binding, ""))}
            for poller in (p for p in pollers if p.name in parsed):
                entry_id = poller_id(binding, poller.name)
                wanted = poller_entry(
                    entry_id,
                    binding,
                    agent,
                    poller,
                    parsed[poller.name],
                    now,
                    grace_s=self.settings.default_grace_s,
                    due=self.scheduler.due,
                )
                old = existing.pop(entry_id, None)
                if old is None:
                    await w.insert_entry(wanted)
                    outcome.created.append(entry_id)
                    continue
                changes = poller_changes(old, wanted)
                if changes:
                    await w.update_entry(entry_id, **changes)
                    outcome.updated.append(entry_id)
                else:
                    outcome.unchanged.append(entry_id)
            for entry_id in existing:
                await w.delete_entry(entry_id)
                outcome.deleted.append(entry_id)
        self.scheduler.wake()
        return outcome


def effective_knobs(settings: CronSettings, overrides: Mapping[str, Any]) -> JitterKnobs:
    """The settings' knobs with run-time overrides on top; InvalidRequest names each bad knob."""
    try:
        return JitterKnobs.model_validate({**settings.jitter.model_dump(), **overrides})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'jitter'}: {error['msg']}"
            for error in exc.errors()
        )
        known = ", ".join(JitterKnobs.model_fields)
        raise InvalidRequest(f"jitter knobs refused ({problems}); the knobs are {known}") from exc


async def _stored_knobs(settings: CronSettings, store: CronStore) -> tuple[JitterKnobs, dict[str, Any]]:
    overrides = await store.config(JITTER_KEY)
    try:
        return effective_knobs(settings, overrides), overrides
    except InvalidRequest as exc:
        logger.warning("ignoring the stored jitter overrides: %s", exc)
        return settings.jitter, {}


@asynccontextmanager
async def open_state(
    settings: CronSettings,
    *,
    clock: Clock = utc_now,
    wait: Wait = sleep_or_wake,
    monotonic: Callable[[], float] | None = None,
    seam: Seam = no_seam,
    run_scheduler: bool = True,
) -> AsyncIterator[CronState]:
    """Open the file, deliver fires recorded but not yet in the event log, start the scheduler."""
    async with open_database(settings.database) as db, anyio.create_task_group() as tg:
        store = CronStore(db)
        events = CronEventLog(db, max_pending=settings.max_pending_events)
        knobs, overrides = await _stored_knobs(settings, store)
        extra: dict[str, Any] = {} if monotonic is None else {"monotonic": monotonic}
        scheduler = Scheduler(store, events, settings, knobs, clock=clock, wait=wait, seam=seam, **extra)
        await scheduler.flush(TickReport(now=clock()))
        if run_scheduler:
            await tg.start(scheduler.run)
        try:
            yield CronState(settings, store, events, scheduler, overrides)
        finally:
            tg.cancel_scope.cancel()
