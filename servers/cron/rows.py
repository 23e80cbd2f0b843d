"""The rows of the cron tables as Python values, and times as the text they are stored as.

Times are stored as fixed-width ISO 8601 text in UTC (microseconds, ``+00:00``), so they compare
correctly as text and the due index orders them. No MCP imports.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from servers.cron.schedule import Schedule

Clock = Callable[[], datetime]

ENTRY_COLUMNS = (
    "id, binding, agent, kind, schedule_kind, spec, timezone, anchor, recurring, text, channel, "
    "recipient, provider, model, misfire, grace_s, overlap, permanent, state, next_slot, next_due, "
    "created_at, finished_at"
)
FIRE_COLUMNS = (
    "id, entry_id, slot, due_at, status, attempt, manual, reason, error, created_at, finished_at, retry_at"
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Fixed width (microseconds, +00:00), so stored times compare correctly as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def maybe_time(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text)


def maybe_iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def new_entry_id() -> str:
    """``c_`` and ten base32 characters (50 random bits)."""
    return "c_" + base64.b32encode(secrets.token_bytes(10)).decode()[:10].lower()


def placeholders(count: int) -> str:
    return ",".join("?" * count)


def column_value(value: Any) -> Any:
    """A Python value as the column stores it."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, bool):
        return int(value)
    return value


@lru_cache(maxsize=4096)
def _schedule(kind: str, spec: str, timezone: str, anchor: datetime) -> Schedule:
    return Schedule(kind, spec, timezone, anchor)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class EntryRow:
    id: str
    binding: str
    agent: str
    kind: str
    schedule_kind: str
    spec: str
    timezone: str
    anchor: datetime
    recurring: bool
    """False for one-shots, also for a recurring schedule created to fire once."""
    text: str
    channel: str | None
    recipient: str | None
    provider: str | None
    model: str | None
    misfire: str
    grace_s: float
    overlap: str
    permanent: bool
    state: str
    next_slot: datetime | None
    next_due: datetime | None
    created_at: datetime
    finished_at: datetime | None

    @property
    def schedule(self) -> Schedule:
        return _schedule(self.schedule_kind, self.spec, self.timezone, self.anchor)

    def values(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.binding,
            self.agent,
            self.kind,
            self.schedule_kind,
            self.spec,
            self.timezone,
            iso(self.anchor),
            int(self.recurring),
            self.text,
            self.channel,
            self.recipient,
            self.provider,
            self.model,
            self.misfire,
            self.grace_s,
            self.overlap,
            int(self.permanent),
            self.state,
            maybe_iso(self.next_slot),
            maybe_iso(self.next_due),
            iso(self.created_at),
            maybe_iso(self.finished_at),
        )


def to_entry(row: Sequence[Any]) -> EntryRow:
    return EntryRow(
        id=row[0],
        binding=row[1],
        agent=row[2],
        kind=row[3],
        schedule_kind=row[4],
        spec=row[5],
        timezone=row[6],
        anchor=parse_time(row[7]),
        recurring=bool(row[8]),
        text=row[9],
        channel=row[10],
        recipient=row[11],
        provider=row[12],
        model=row[13],
        misfire=row[14],
        grace_s=float(row[15]),
        overlap=row[16],
        permanent=bool(row[17]),
        state=row[18],
        next_slot=maybe_time(row[19]),
        next_due=maybe_time(row[20]),
        created_at=parse_time(row[21]),
        finished_at=maybe_time(row[22]),
    )


@dataclass(frozen=True, slots=True)
class FireRow:
    id: int
    entry_id: str
    slot: datetime
    due_at: datetime
    status: str
    attempt: int
    manual: bool
    reason: str
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    retry_at: datetime | None


def to_fire(row: Sequence[Any]) -> FireRow:
    return FireRow(
        id=int(row[0]),
        entry_id=row[1],
        slot=parse_time(row[2]),
        due_at=parse_time(row[3]),
        status=row[4],
        attempt=int(row[5]),
        manual=bool(row[6]),
        reason=row[7],
        error=row[8],
        created_at=parse_time(row[9]),
        finished_at=maybe_time(row[10]),
        retry_at=maybe_time(row[11]),
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
