"""Slots that come due too late: when a slot counts as misfired, which slots of an entry are overdue,
and what the entry's misfire policy makes of them.

A slot is misfired when it comes due more than ``misfire_tolerance_s`` late (the server was down,
the wall clock jumped forward, the process was stopped). The policy fires some overdue slots now
(``catch_up_once`` the newest, ``all`` those inside the grace window), records the rest as missed,
and parks the entry (``park``) or expires it when no slot is left. Nothing here writes: the
scheduler applies the plan in one transaction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio.lowlevel

from servers.cron.store import EntryRow

SLOT_CHUNK = 1_000
"""Slots computed per step while counting the overdue ones (a checkpoint between steps)."""


def effective_misfire(entry: EntryRow) -> str:
    """Config-owned entries are never parked: they skip what they missed."""
    return "skip" if entry.permanent and entry.misfire == "park" else entry.misfire


def misfired(entry: EntryRow, now: datetime, tolerance: timedelta) -> bool:
    """Whether the entry's next slot came due more than ``tolerance`` before ``now``."""
    assert entry.next_slot is not None
    assert entry.next_due is not None
    # A one-shot moved early by its jitter is not late before its slot.
    return now - max(entry.next_due, entry.next_slot) > tolerance


@dataclass
class Overdue:
    """The slots of one entry whose due time has passed, from its next slot on."""

    count: int
    recent: list[tuple[datetime, datetime]]
    """The newest (slot, due) pairs, oldest first, at most ``max_missed_rows``."""
    next_slot: datetime | None
    next_due: datetime | None


async def overdue_slots(
    entry: EntryRow, now: datetime, due: Callable[[EntryRow, datetime], datetime], max_recent: int
) -> Overdue:
    """Every slot from the entry's next one whose due time (``due(entry, slot)``) is at or before
    ``now``, keeping the newest ``max_recent``."""
    recent: deque[tuple[datetime, datetime]] = deque(maxlen=max_recent)
    count = 0
    batch = [] if entry.next_slot is None else [entry.next_slot]
    while batch:
        for slot in batch:
            slot_due = due(entry, slot)
            if slot_due > now:
                return Overdue(count, list(recent), slot, slot_due)
            count += 1
            recent.append((slot, slot_due))
        if not entry.recurring:
            break
        last = batch[-1]
        batch = entry.schedule.slots_between(last, now, SLOT_CHUNK)
        if not batch:
            nxt = entry.schedule.next_after(last)
            batch = [] if nxt is None else [nxt]
        await anyio.lowlevel.checkpoint()
    return Overdue(count, list(recent), None, None)


@dataclass
class MisfirePlan:
    """What the entry's misfire policy makes of its overdue slots."""

    policy: str
    to_fire: list[tuple[datetime, datetime]]
    """(slot, due) pairs to fire now as catch-up fires."""
    missed: list[tuple[datetime, datetime]]
    """The newest of the slots that do not fire, recorded as missed rows."""
    missed_count: int
    next_slot: datetime | None
    next_due: datetime | None
    changes: dict[str, Any]
    """Entry columns changed together with the move to the next slot (state, finished_at)."""

    @property
    def parks(self) -> bool:
        return self.policy == "park"

    @property
    def expires(self) -> bool:
        return self.changes.get("state") == "expired"


def plan_misfire(entry: EntryRow, overdue: Overdue, now: datetime) -> MisfirePlan:
    """Apply the entry's policy to its overdue slots at ``now``."""
    policy = effective_misfire(entry)
    to_fire: list[tuple[datetime, datetime]] = []
    if policy == "catch_up_once":
        to_fire = overdue.recent[-1:]
    elif policy == "all":
        oldest = now - timedelta(seconds=entry.grace_s)
        to_fire = [(slot, due) for slot, due in overdue.recent if slot >= oldest]
    missed = overdue.recent[: len(overdue.recent) - len(to_fire)]
    next_slot, next_due = overdue.next_slot, overdue.next_due
    changes: dict[str, Any] = {}
    if policy == "park":
        changes["state"] = "parked"
        if not entry.recurring:
            next_slot, next_due = entry.next_slot, entry.next_due  # resuming fires it late
    elif next_slot is None and not to_fire:
        changes.update(state="expired", finished_at=now)
    return MisfirePlan(
        policy=policy,
        to_fire=to_fire,
        missed=missed,
        missed_count=overdue.count - len(to_fire),
        next_slot=next_slot,
        next_due=next_due,
        changes=changes,
    )
