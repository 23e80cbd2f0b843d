"""How a fire ends: the orchestrator's outcome report, and the retries of failed one-shots.

A failed one-shot is tried again after an exponential backoff (``retry_base_s`` doubling up to
``retry_cap_s``) until ``retry_max_attempts``; any other outcome ends the fire, and the entry with
it when that was its last slot. A repeated or stale report changes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from servers.cron.errors import FireNotFound
from servers.cron.settings import CronSettings
from servers.cron.store import CronStore, EntryRow, FireRow, Writer
from shared.protocol.cron import FINISHED_STATES


def retry_delay(settings: CronSettings, attempt: int) -> timedelta:
    """The wait before the attempt after ``attempt`` (the first attempt is 1)."""
    return timedelta(seconds=min(settings.retry_cap_s, settings.retry_base_s * 2 ** (attempt - 1)))


async def report_outcome(
    store: CronStore,
    settings: CronSettings,
    fire_id: int,
    outcome: str,
    *,
    error: str | None,
    attempt: int | None,
    now: datetime,
) -> tuple[FireRow, EntryRow]:
    """Record how fire ``fire_id`` ended, at ``now``; the fire and its entry afterwards."""
    async with store.writing() as w:
        fire = await w.fire(fire_id)
        if fire is None:
            raise FireNotFound(
                f"no cron fire has id {fire_id!r}; take fire_id from the cron_fire event, "
                "or list recent ones with nexo/cron/fires"
            )
        entry = await w.entry(fire.entry_id)
        assert entry is not None  # fires go with their entry
        if fire.status in ("pending", "delivered") and (attempt is None or attempt == fire.attempt):
            await record_outcome(w, settings, fire, entry, outcome, error, now)
        after, entry_after = await w.fire(fire_id), await w.entry(fire.entry_id)
    assert after is not None
    assert entry_after is not None
    return after, entry_after


async def record_outcome(
    w: Writer,
    settings: CronSettings,
    fire: FireRow,
    entry: EntryRow,
    outcome: str,
    error: str | None,
    now: datetime,
) -> None:
    """End the fire, or schedule its retry; finish the entry when its last slot has ended."""
    one_shot = not entry.recurring and not fire.manual
    unfinished = entry.state not in FINISHED_STATES
    if outcome == "failed" and one_shot and unfinished and fire.attempt < settings.retry_max_attempts:
        await w.schedule_retry(fire.id, error=error, retry_at=now + retry_delay(settings, fire.attempt))
        return
    await w.end_fire(fire.id, outcome, error=error, now=now)
    if not fire.manual and unfinished and entry.next_slot is None:
        # The entry's last slot has ended: a one-shot, or a schedule with no more slots.
        state = "failed" if outcome == "failed" else "done"
        await w.update_entry(entry.id, state=state, finished_at=now, next_due=None)
