"""Per-entry jitter: spread fires so entries sharing a schedule do not all wake at the same second.

The offset of an entry depends only on a hash of its id, so a retry, a restart or a reloaded
configuration (with the same knobs) never moves it. Recurring entries fire late by up to a fraction
of their interval; one-shots on a round minute fire early, never late.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Self
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from servers.cron.schedule import Schedule

_FRACTION_BITS = 53


class JitterKnobs(BaseModel):
    """How far fires are spread. Every knob can be changed at run time; offsets follow the new values."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Off: every offset is zero (recurring_max_age_ms still applies).")
    recurring_frac: float = Field(
        0.10, description="Recurring entries fire late by up to this fraction of their interval (0..1)."
    )
    recurring_cap_ms: int = Field(300_000, description="Upper bound of the recurring late offset, ms (>= 0).")
    one_shot_max_ms: int = Field(
        30_000, description="One-shots fire up to this much early, never late, ms (>= 0)."
    )
    one_shot_floor_ms: int = Field(
        0, description="Smallest early offset of a jittered one-shot, ms (0..one_shot_max_ms)."
    )
    one_shot_minute_mod: int = Field(
        1,
        description="Jitter a one-shot only when its local minute is a multiple of this and its second is 0 "
        "(>= 0; 0: never).",
    )
    recurring_max_age_ms: int = Field(
        0, description="Recurring entries older than this expire, permanent ones never, ms (>= 0; 0: off)."
    )

    @field_validator("recurring_frac")
    @classmethod
    def _fraction_in_range(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError(
                f"recurring_frac must be between 0 and 1 (a fraction of the interval), got {value!r}"
            )
        return value

    @field_validator(
        "recurring_cap_ms",
        "one_shot_max_ms",
        "one_shot_floor_ms",
        "one_shot_minute_mod",
        "recurring_max_age_ms",
    )
    @classmethod
    def _not_negative(cls, value: int, info: ValidationInfo) -> int:
        if value < 0:
            raise ValueError(f"{info.field_name} must be 0 or more, got {value!r}")
        return value

    @model_validator(mode="after")
    def _floor_within_max(self) -> Self:
        if self.one_shot_floor_ms > self.one_shot_max_ms:
            raise ValueError(
                f"one_shot_floor_ms ({self.one_shot_floor_ms}) must be between 0 and one_shot_max_ms "
                f"({self.one_shot_max_ms}); lower the floor or raise the maximum"
            )
        return self


def entry_fraction(entry_id: str) -> float:
    """A fraction in [0, 1) fixed by `entry_id` (the top 53 bits of its SHA-256)."""
    return _entry_bits(entry_id) / (1 << _FRACTION_BITS)


def jitter_offset(entry_id: str, schedule: Schedule, knobs: JitterKnobs) -> timedelta:
    """Signed offset added to every slot of this entry: >= 0 for recurring (late), <= 0 for one-shots (early).

    Recurring: ``fraction * min(recurring_frac * nominal interval, recurring_cap_ms)``, in
    [0, that window). One-shot on a jittered minute: ``-(floor + fraction * (max - floor))``, in
    (-one_shot_max_ms, -one_shot_floor_ms]. Derived only from a hash of `entry_id`, so a retry or a
    restart never moves it. Exact to the microsecond (integer arithmetic).
    """
    if not knobs.enabled:
        return timedelta(0)
    bits = _entry_bits(entry_id)
    if schedule.recurring:
        interval_us = (schedule.nominal_interval_s or 0.0) * 1_000_000
        window_us = int(min(knobs.recurring_frac * interval_us, knobs.recurring_cap_ms * 1000))
        return timedelta(microseconds=(bits * window_us) >> _FRACTION_BITS)
    if not _one_shot_jittered(schedule, knobs):
        return timedelta(0)
    floor_us = knobs.one_shot_floor_ms * 1000
    span_us = knobs.one_shot_max_ms * 1000 - floor_us
    return -timedelta(microseconds=floor_us + ((bits * span_us) >> _FRACTION_BITS))


def due_at(entry_id: str, schedule: Schedule, slot: datetime, knobs: JitterKnobs) -> datetime:
    """When the fire for `slot` is due: ``slot + jitter_offset(...)``.

    Never earlier than ``slot - one_shot_max_ms``. A one-shot created less than that before its time
    can come out due before its creation: clamping to the creation time is the caller's job.
    """
    if slot.utcoffset() is None:
        raise ValueError(f"slot={slot.isoformat()!r} has no timezone; pass an aware datetime")
    return slot + jitter_offset(entry_id, schedule, knobs)


def expired_by_age(
    created_at: datetime, now: datetime, knobs: JitterKnobs, *, recurring: bool, permanent: bool
) -> bool:
    """Whether a recurring, non-permanent entry is older than ``recurring_max_age_ms`` (0: never)."""
    for name, moment in (("created_at", created_at), ("now", now)):
        if moment.utcoffset() is None:
            raise ValueError(f"{name}={moment.isoformat()!r} has no timezone; pass an aware datetime")
    if not recurring or permanent or knobs.recurring_max_age_ms == 0:
        return False
    return now - created_at > timedelta(milliseconds=knobs.recurring_max_age_ms)


def _entry_bits(entry_id: str) -> int:
    digest = hashlib.sha256(entry_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - _FRACTION_BITS)


def _one_shot_jittered(schedule: Schedule, knobs: JitterKnobs) -> bool:
    """A one-shot is jittered when it sits on a round minute of its own timezone's wall clock."""
    if knobs.one_shot_minute_mod == 0:
        return False
    local = schedule.anchor.astimezone(ZoneInfo(schedule.timezone))
    return local.second == 0 and local.minute % knobs.one_shot_minute_mod == 0
