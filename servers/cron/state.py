"""What the cron server holds while it runs (database, event log, scheduler) and the operations on
entries that its tools and control methods share."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import anyio
from pydantic import ValidationError

from servers.cron.errors import InvalidRequest, LimitReached, OwnedByConfig, StateRefused
from servers.cron.jitter import JitterKnobs
from servers.cron.schedule import Schedule, ScheduleError, parse_schedule
from servers.cron.scheduler import Scheduler, Seam, TickReport, Wait, no_seam, require_entry, sleep_or_wake
from servers.cron.settings import CronSettings
from servers.cron.store import (
    Clock,
    CronEventLog,
    CronStore,
    EntryRow,
    FireRow,
    iso,
    new_entry_id,
    open_database,
    utc_now,
)
from shared.protocol.cron import (
    DEFAULT_AGENT,
    DEFAULT_BINDING,
    FINISHED_STATES,
    MAX_TEXT,
    MISFIRE_POLICIES,
    Entry,
    Fire,
    PollerSpec,
    poller_id,
)

logger = logging.getLogger("nexo.cron")

JITTER_KEY = "jitter"
MAX_SCHEDULE_TEXT = 200
MAX_ADDRESS = 200


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


def local_time(moment: datetime | None, timezone: str) -> str | None:
    return None if moment is None else moment.astimezone(ZoneInfo(timezone)).isoformat(timespec="seconds")


def entry_model(entry: EntryRow, last_fire: str | None) -> Entry:
    return Entry(
        id=entry.id,
        binding=entry.binding,
        agent=entry.agent,
        kind=entry.kind,
        schedule=entry.spec,
        schedule_kind=entry.schedule_kind,
        timezone=entry.timezone,
        recurring=entry.recurring,
        text=entry.text,
        channel=entry.channel,
        recipient=entry.recipient,
        provider=entry.provider,
        model=entry.model,
        misfire=entry.misfire,
        grace_s=entry.grace_s,
        overlap=entry.overlap,
        permanent=entry.permanent,
        state=entry.state,
        next_slot=None if entry.next_slot is None else iso(entry.next_slot),
        next_due=None if entry.next_due is None else iso(entry.next_due),
        next_due_local=local_time(entry.next_due, entry.timezone),
        created_at=iso(entry.created_at),
        finished_at=None if entry.finished_at is None else iso(entry.finished_at),
        last_fire=last_fire,
    )


def fire_model(fire: FireRow) -> Fire:
    return Fire(
        id=fire.id,
        entry_id=fire.entry_id,
        slot=iso(fire.slot),
        due_at=iso(fire.due_at),
        status=fire.status,
        attempt=fire.attempt,
        manual=fire.manual,
        reason=fire.reason,
        error=fire.error,
        created_at=iso(fire.created_at),
        finished_at=None if fire.finished_at is None else iso(fire.finished_at),
        retry_at=None if fire.retry_at is None else iso(fire.retry_at),
    )


def _parse(text: str, timezone: str, now: datetime, what: str = "schedule") -> Schedule:
    if len(text) > MAX_SCHEDULE_TEXT:
        raise InvalidRequest(f"the {what} is {len(text)} characters long; keep it under {MAX_SCHEDULE_TEXT}")
    try:
        return parse_schedule(text, timezone=timezone, now=now)
    except ScheduleError as exc:
        raise InvalidRequest(str(exc)) from exc


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise InvalidRequest(f"the {what} is empty; say what should happen when the entry fires")
    if len(value) > MAX_TEXT:
        raise InvalidRequest(f"the {what} is {len(value)} characters long; keep it under {MAX_TEXT}")
    return value


def _address(value: str | None, what: str) -> str | None:
    if value is not None and not 0 < len(value) <= MAX_ADDRESS:
        raise InvalidRequest(f"{what} {value[:40]!r} must be 1-{MAX_ADDRESS} characters, or left out")
    return value


def _misfire(value: str | None, permanent: bool) -> str:
    if value is None:
        return "skip" if permanent else "park"
    if value not in MISFIRE_POLICIES:
        raise InvalidRequest(
            f"misfire {value!r} is not a policy; use one of {', '.join(MISFIRE_POLICIES)} "
            "(park waits for a resume, skip drops missed runs, catch_up_once runs the latest, "
            "all runs each one inside the grace window)"
        )
    return value


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
        parsed = self._when(schedule, timezone or self.settings.default_timezone, now, one_shot_only)
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
            text=_text(text, "reminder text" if kind == "reminder" else "prompt"),
            channel=_address(channel, "channel"),
            recipient=_address(recipient, "recipient"),
            provider=caller.provider,
            model=caller.model,
            misfire=_misfire(misfire, permanent=False),
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

    def _when(self, text: str, timezone: str, now: datetime, one_shot_only: bool) -> Schedule:
        if not one_shot_only:
            return _parse(text, timezone, now)
        try:
            parsed = _parse(text, timezone, now, "time")
        except InvalidRequest as refusal:
            # A bare time or timestamp ("09:00", "2026-12-01T09:00:00Z") means once_at it.
            if text.strip().lower().startswith("once"):
                raise
            try:
                parsed = _parse(f"once_at {text.strip()}", timezone, now, "time")
            except InvalidRequest:
                raise refusal from None
        if parsed.recurring:
            raise InvalidRequest(
                f"{text!r} repeats; a reminder fires once: use 'once_after 2h', 'once_at 09:00' or "
                "'once_at 2026-12-01T09:00:00Z' (cron_create makes repeating entries)"
            )
        return parsed

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

    async def sync_pollers(self, binding: str, agent: str, pollers: Sequence[PollerSpec]) -> SyncOutcome:
        """Make the binding's config-owned pollers exactly ``pollers``: upsert them, delete the rest."""
        now = self.clock()
        names = [poller.name for poller in pollers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise InvalidRequest(f"poller names repeat: {', '.join(repeated)}; give each poller its own name")
        parsed: dict[str, Schedule] = {}
        for poller in pollers:
            try:
                schedule = _parse(poller.schedule, poller.timezone, now)
            except InvalidRequest as exc:
                raise InvalidRequest(f"poller {poller.name!r}: {exc}") from exc
            if not schedule.recurring:
                raise InvalidRequest(
                    f"poller {poller.name!r}: {poller.schedule!r} fires once; pollers repeat, "
                    "e.g. 'every 15m' or '*/30 * * * *'"
                )
            parsed[poller.name] = schedule
        outcome = SyncOutcome()
        async with self.store.writing() as w:
            existing = {entry.id: entry for entry in await w.entries_with_prefix(poller_id(binding, ""))}
            for poller in pollers:
                entry_id = poller_id(binding, poller.name)
                wanted = self._poller_entry(entry_id, binding, agent, poller, parsed[poller.name], now)
                old = existing.pop(entry_id, None)
                if old is None:
                    await w.insert_entry(wanted)
                    outcome.created.append(entry_id)
                    continue
                changes = self._poller_changes(old, wanted)
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

    def _poller_entry(
        self, entry_id: str, binding: str, agent: str, poller: PollerSpec, schedule: Schedule, now: datetime
    ) -> EntryRow:
        slot = schedule.next_after(now)
        entry = EntryRow(
            id=entry_id,
            binding=binding,
            agent=agent,
            kind="agent_turn",
            schedule_kind=schedule.kind,
            spec=schedule.spec,
            timezone=schedule.timezone,
            anchor=schedule.anchor,
            recurring=True,
            text=poller.prompt,
            channel=poller.channel,
            recipient=poller.recipient,
            provider=None,
            model=None,
            misfire=_misfire(poller.misfire, permanent=True),
            grace_s=self.settings.default_grace_s,
            overlap="skip",
            permanent=True,
            state="active",
            next_slot=slot,
            next_due=None,
            created_at=now,
            finished_at=None,
        )
        return replace(entry, next_due=None if slot is None else self.scheduler.due(entry, slot))

    @staticmethod
    def _poller_changes(old: EntryRow, wanted: EntryRow) -> dict[str, Any]:
        changes: dict[str, Any] = {
            name: getattr(wanted, name)
            for name in ("agent", "text", "channel", "recipient", "misfire")
            if getattr(old, name) != getattr(wanted, name)
        }
        if (old.spec, old.timezone) != (wanted.spec, wanted.timezone) or old.state in FINISHED_STATES:
            changes.update(
                schedule_kind=wanted.schedule_kind,
                spec=wanted.spec,
                timezone=wanted.timezone,
                anchor=wanted.anchor,
                next_slot=wanted.next_slot,
                next_due=wanted.next_due,
            )
            if old.state in FINISHED_STATES:
                changes.update(state="active", finished_at=None)
        return changes


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
