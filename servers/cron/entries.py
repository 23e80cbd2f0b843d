"""Entries as the server checks, builds and shows them: the checks on what a caller asks for, the
rows of config-owned pollers, visibility by binding, and the wire models of entries and fires."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from servers.cron.errors import EntryNotFound, InvalidRequest
from servers.cron.schedule import Schedule
from servers.cron.schedule_forms import ScheduleError
from servers.cron.schedule_parse import parse_schedule
from servers.cron.store import EntryRow, FireRow, iso
from shared.protocol.cron import FINISHED_STATES, MAX_TEXT, MISFIRE_POLICIES, Entry, Fire, PollerSpec

MAX_SCHEDULE_TEXT = 200
MAX_ADDRESS = 200


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


def require_entry(entry: EntryRow | None, entry_id: str, binding: str | None) -> EntryRow:
    """The entry, if the caller may see it (its binding, or any binding for the operator)."""
    if entry is None or (binding is not None and entry.binding != binding):
        raise EntryNotFound(
            f"no cron entry {entry_id!r}"
            + (f" in binding {binding!r}" if binding is not None else "")
            + "; list the entries with cron_list (or nexo/cron/list) and use one of their ids"
        )
    return entry


def checked_schedule(text: str, timezone: str, now: datetime, what: str = "schedule") -> Schedule:
    """``text`` parsed; InvalidRequest says what is wrong with it."""
    if len(text) > MAX_SCHEDULE_TEXT:
        raise InvalidRequest(f"the {what} is {len(text)} characters long; keep it under {MAX_SCHEDULE_TEXT}")
    try:
        return parse_schedule(text, timezone=timezone, now=now)
    except ScheduleError as exc:
        raise InvalidRequest(str(exc)) from exc


def checked_text(value: str, what: str) -> str:
    if not value.strip():
        raise InvalidRequest(f"the {what} is empty; say what should happen when the entry fires")
    if len(value) > MAX_TEXT:
        raise InvalidRequest(f"the {what} is {len(value)} characters long; keep it under {MAX_TEXT}")
    return value


def checked_address(value: str | None, what: str) -> str | None:
    if value is not None and not 0 < len(value) <= MAX_ADDRESS:
        raise InvalidRequest(f"{what} {value[:40]!r} must be 1-{MAX_ADDRESS} characters, or left out")
    return value


def misfire_policy(value: str | None, permanent: bool) -> str:
    """The policy asked for, or the default (config-owned pollers skip, others park)."""
    if value is None:
        return "skip" if permanent else "park"
    if value not in MISFIRE_POLICIES:
        raise InvalidRequest(
            f"misfire {value!r} is not a policy; use one of {', '.join(MISFIRE_POLICIES)} "
            "(park waits for a resume, skip drops missed runs, catch_up_once runs the latest, "
            "all runs each one inside the grace window)"
        )
    return value


def requested_schedule(text: str, timezone: str, now: datetime, *, one_shot_only: bool) -> Schedule:
    """The schedule a caller asked for; with ``one_shot_only``, one that fires once (a bare time or
    timestamp is read as ``once_at`` it)."""
    if not one_shot_only:
        return checked_schedule(text, timezone, now)
    try:
        parsed = checked_schedule(text, timezone, now, "time")
    except InvalidRequest as refusal:
        # A bare time or timestamp ("09:00", "2026-12-01T09:00:00Z") means once_at it.
        if text.strip().lower().startswith("once"):
            raise
        try:
            parsed = checked_schedule(f"once_at {text.strip()}", timezone, now, "time")
        except InvalidRequest:
            raise refusal from None
    if parsed.recurring:
        raise InvalidRequest(
            f"{text!r} repeats; a reminder fires once: use 'once_after 2h', 'once_at 09:00' or "
            "'once_at 2026-12-01T09:00:00Z' (cron_create makes repeating entries)"
        )
    return parsed


def poller_entry(
    entry_id: str,
    binding: str,
    agent: str,
    poller: PollerSpec,
    schedule: Schedule,
    now: datetime,
    *,
    grace_s: float,
    due: Callable[[EntryRow, datetime], datetime],
) -> EntryRow:
    """The row a config-owned poller should have; ``due(entry, slot)`` gives its next due time."""
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
        misfire=misfire_policy(poller.misfire, permanent=True),
        grace_s=grace_s,
        overlap="skip",
        permanent=True,
        state="active",
        next_slot=slot,
        next_due=None,
        created_at=now,
        finished_at=None,
    )
    return replace(entry, next_due=None if slot is None else due(entry, slot))


def poller_changes(old: EntryRow, wanted: EntryRow) -> dict[str, Any]:
    """The columns to update so that ``old`` becomes ``wanted`` (a finished poller starts again)."""
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
