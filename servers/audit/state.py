"""What the audit server holds while it runs: the database, the stores and their background tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from servers.audit.committer import GroupCommitter
from servers.audit.goals import GoalRegistry
from servers.audit.retention import Retention
from servers.audit.settings import AuditSettings
from servers.audit.store import Clock, Ledger, open_database, utc_now


@dataclass(frozen=True, slots=True)
class AuditState:
    ledger: Ledger
    goals: GoalRegistry
    committer: GroupCommitter
    retention: Retention


@asynccontextmanager
async def open_state(settings: AuditSettings, *, clock: Clock = utc_now) -> AsyncIterator[AuditState]:
    """Open the file, start the group-commit writer and periodic retention; stop both on exit."""
    async with open_database(settings.database) as db, anyio.create_task_group() as tg:
        ledger = Ledger(db, clock=clock)
        committer = GroupCommitter(
            ledger,
            max_batch=settings.commit_batch_max,
            window_s=settings.commit_window_ms / 1000,
            queue_max=settings.queue_max,
        )
        await tg.start(committer.run)
        retention = Retention(
            ledger,
            turns_per_goal=settings.turns_per_goal,
            max_age_s=settings.max_age_s,
            interval_s=settings.trim_interval_s,
        )
        if settings.trim_interval_s > 0:
            tg.start_soon(retention.run_periodically)
        try:
            yield AuditState(
                ledger=ledger,
                goals=GoalRegistry(
                    ledger, max_running=settings.max_concurrent_goals, writes=committer.run_in_batch
                ),
                committer=committer,
                retention=retention,
            )
        finally:
            tg.cancel_scope.cancel()
