"""The durable event log: append once per dedupe key, long-poll pull, ack, bounded size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from shared.db import Database
from shared.events import EVENTS_MIGRATIONS, EventLog, EventLogFull

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    async with Database.open(tmp_path / "events.db", EVENTS_MIGRATIONS) as database:
        yield database


async def test_an_event_is_stored_once_per_dedupe_key(db: Database) -> None:
    log = EventLog(db)
    first = await log.append("message", "tg:1", {"content": "hi"})
    again = await log.append("message", "tg:1", {"content": "changed"})
    (event,) = await log.pull()
    assert (first.created, again.created, again.seq) == (True, False, first.seq)
    assert (event.seq, event.kind, event.dedupe_key, event.payload, event.deliveries) == (
        first.seq,
        "message",
        "tg:1",
        {"content": "hi"},
        1,
    )


async def test_a_zero_wait_answers_at_once_whether_or_not_anything_is_pending(db: Database) -> None:
    log = EventLog(db)
    assert await log.pull(wait_s=0) == []
    await log.append("message", "k", {})
    assert [e.dedupe_key for e in await log.pull(wait_s=0)] == ["k"]


async def test_a_long_poll_wakes_on_append_and_ends_empty_at_its_timeout(db: Database) -> None:
    log = EventLog(db)
    got: list[str] = []

    async def poll() -> None:
        got.extend(e.dedupe_key for e in await log.pull(wait_s=30))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(poll)
            await anyio.wait_all_tasks_blocked()
            await log.append("message", "late", {})
    assert got == ["late"]
    with anyio.fail_after(10):
        assert await log.pull(after=10_000, wait_s=0.01) == []


async def test_unacked_events_come_back_counted_and_acked_ones_do_not(db: Database) -> None:
    clock = Clock()
    log = EventLog(db, clock=clock)
    a = await log.append("message", "a", {})
    b = await log.append("permission_verdict", "b", {})
    await log.pull()
    again = await log.pull(kinds=["message"])
    assert [(e.seq, e.deliveries) for e in again] == [(a.seq, 2)]
    assert await log.ack([a.seq, a.seq, 999]) == 1
    assert await log.ack([]) == 0
    assert [e.seq for e in await log.pull()] == [b.seq]
    assert await log.pending_count() == 1
    clock.now += 100
    assert await log.purge_acked(older_than_s=50) == 1
    assert (await log.append("message", "a", {})).created  # purged: the key no longer protects


async def test_a_full_log_refuses_new_events_and_says_how_to_queue_more(db: Database) -> None:
    log = EventLog(db, max_pending=1)
    await log.append("message", "one", {})
    with pytest.raises(EventLogFull, match="1 events are waiting for the orchestrator"):
        await log.append("message", "two", {})
    assert not (await log.append("message", "one", {})).created  # a redelivery is still recognised


async def test_a_dead_letter_leaves_the_pull_until_replayed_at_the_end_or_purged(db: Database) -> None:
    log = EventLog(db)
    bad = await log.append("message", "bad", {"x": 1})
    good = await log.append("message", "good", {})
    assert await log.dead_letter(bad.seq, "malformed")
    assert not await log.dead_letter(bad.seq, "twice")
    assert [e.seq for e in await log.pull()] == [good.seq]
    assert await log.pending_count() == 1
    (dead,) = await log.dead()
    assert (dead.seq, dead.dedupe_key, dead.payload, dead.reason) == (bad.seq, "bad", {"x": 1}, "malformed")
    assert await log.replay([bad.seq, 999]) == 1
    replayed = await log.pull(after=good.seq)
    assert [(e.dedupe_key, e.payload) for e in replayed] == [("bad", {"x": 1})]
    assert replayed[0].seq > good.seq
    assert await log.replay([]) == 0
    assert await log.dead_letter(replayed[0].seq, "again")
    assert await log.purge_dead() == 1
    assert await log.dead() == []
    assert not (await log.append("message", "bad", {})).created  # purged, but its key still holds
