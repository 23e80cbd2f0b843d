"""The abuse limits: caps on codes and replies, and the approval lockout that failed attempts trigger."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from servers.pairing.errors import LockedOut, PairingError
from servers.pairing.schema import iso
from servers.pairing.settings import PairingSettings
from shared.db import Database, Transaction
from shared.protocol.pairing import Lockout


@dataclass(frozen=True, slots=True)
class Limits:
    max_pending: int = 3
    max_replies: int = 2
    new_code_interval: timedelta = timedelta(minutes=10)
    code_ttl: timedelta = timedelta(hours=1)
    lockout_failures: int = 5
    lockout_window: timedelta = timedelta(hours=1)
    lockout: timedelta = timedelta(hours=1)

    @classmethod
    def of(cls, settings: PairingSettings) -> Limits:
        return cls(
            max_pending=settings.max_pending,
            max_replies=settings.max_replies_per_pending,
            new_code_interval=timedelta(seconds=settings.new_code_interval_s),
            code_ttl=timedelta(seconds=settings.code_ttl_s),
            lockout_failures=settings.lockout_failures,
            lockout_window=timedelta(seconds=settings.lockout_window_s),
            lockout=timedelta(seconds=settings.lockout_s),
        )


def shown_time(moment: datetime) -> str:
    """A moment as people read it in a message (seconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(delta: timedelta) -> str:
    """A span as people read it in a message: whole hours, else minutes, else seconds."""
    seconds = delta.total_seconds()
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds:g} s"


async def lockout_refusal(tx: Transaction, limits: Limits, now: datetime) -> LockedOut | None:
    """The refusal every approval gets while a lockout lasts; None when approvals are open."""
    row = await tx.fetchone("SELECT until FROM lockout WHERE id = 1 AND until > ?", (iso(now),))
    if row is None:
        return None
    until = datetime.fromisoformat(row[0])
    return LockedOut(
        f"approvals are locked until {shown_time(until)} (in {duration(until - now)}) after "
        f"{limits.lockout_failures} failed attempts; wait until then, and check the code with "
        "the sender first (`nexo pair list` shows who is waiting)"
    )


async def count_failure(
    tx: Transaction, limits: Limits, refusal: PairingError, now: datetime
) -> PairingError:
    """Record one failed approval; the same refusal, told how close (or that) approvals are locked."""
    await tx.execute("INSERT INTO approve_failures(at) VALUES (?)", (iso(now),))
    (failures,) = await tx.fetchone(
        "SELECT COUNT(*) FROM approve_failures WHERE at > ?", (iso(now - limits.lockout_window),)
    ) or (0,)
    window = duration(limits.lockout_window)
    if failures < limits.lockout_failures:
        left = limits.lockout_failures - failures
        locks = duration(limits.lockout)
        note = f" ({left} more failed attempt(s) within {window} lock approvals for {locks})"
    else:
        until = now + limits.lockout
        await tx.execute(
            "INSERT INTO lockout(id, until) VALUES (1, ?) "
            "ON CONFLICT(id) DO UPDATE SET until = excluded.until",
            (iso(until),),
        )
        await tx.execute("DELETE FROM approve_failures")
        note = (
            f" ({failures} failed attempts within {window}: approvals are now locked until "
            f"{shown_time(until)})"
        )
    return type(refusal)(str(refusal) + note)


async def lockout_state(db: Database, limits: Limits, now: datetime) -> Lockout:
    """When the current lockout ends (if any) and how many failures count toward the next one."""
    stamp = iso(now)
    until = await db.fetchone("SELECT until FROM lockout WHERE id = 1 AND until > ?", (stamp,))
    (failures,) = await db.fetchone(
        "SELECT COUNT(*) FROM approve_failures WHERE at > ?", (iso(now - limits.lockout_window),)
    ) or (0,)
    return Lockout(until=None if until is None else until[0], failures=failures)
