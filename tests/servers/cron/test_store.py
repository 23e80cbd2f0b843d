"""The SQLite store: schema from a blank file, the due index, unique slots, conditional advances,
retention and the file's permissions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from servers.cron.store import (
    CronStore,
    EntryRow,
    iso,
    new_entry_id,
    open_database,
    parse_time,
)
from shared.db import Database
from shared.events import EVENTS_MIGRATIONS, EventLog
from tests.servers.cron.conftest import START, at, rows

pytestmark = pytest.mark.anyio


def entry(entry_id: str | None = None, **changes: object) -> EntryRow:
    values: dict[str, object] = {
        "id": entry_id or new_entry_id(),
        "binding": "home",
        "agent": "nexo",
        "kind": "prompt",
        "schedule_kind": "cron",
        "spec": "cron 0 * * * *",
        "timezone": "UTC",
        "anchor": START,
        "recurring": True,
        "text": "p",
        "channel": None,
        "recipient": None,
        "provider": "anthropic",
        "model": "claude",
        "misfire": "park",
        "grace_s": 86_400.0,
        "overlap": "skip",
        "permanent": False,
        "state": "active",
        "next_slot": at(13),
        "next_due": at(13),
        "created_at": START,
        "finished_at": None,
    }
    values.update(changes)
    return EntryRow(**values)  # type: ignore[arg-type]


async def test_a_blank_file_gets_the_schema_private_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "cron.db"
    async with open_database(path):
        pass
    async with open_database(path):
        pass
    names = [name for (name,) in rows(path, "SELECT name FROM _migrations ORDER BY rowid")]
    assert names == ["events_0001_create", "events_0002_dead_letters", "cron_0001_create"]
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    tables = {name for (name,) in rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"entries", "fires", "missed_outbox", "config", "events"} <= tables


async def test_a_file_with_only_the_event_log_gains_the_cron_tables_and_keeps_its_events(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cron.db"
    async with Database.open(path, EVENTS_MIGRATIONS) as db:
        await EventLog(db).append("cron_fire", "fire:c_x:slot:1", {"fire_id": 1})
    async with open_database(path) as db:
        kept = await EventLog(db).pull()
        await CronStore(db).entries()
    assert [(event.kind, event.dedupe_key) for event in kept] == [("cron_fire", "fire:c_x:slot:1")]


async def test_entries_round_trip_and_the_due_query_uses_the_index(tmp_path: Path) -> None:
    path = tmp_path / "cron.db"
    first, second, paused = entry(next_due=at(14)), entry(next_due=at(13)), entry(state="paused")
    async with open_database(path) as db:
        store = CronStore(db)
        async with store.writing() as w:
            for row in (first, second, paused):
                await w.insert_entry(row)
        assert await store.entry(first.id) == first
        assert [e.id for e in await store.due_entries(at(14), 10)] == [second.id, first.id]
        assert [e.id for e in await store.due_entries(at(13), 10)] == [second.id]
        assert await store.earliest_due() == at(13)
        plan = await db.fetchall(
            "EXPLAIN QUERY PLAN SELECT id FROM entries WHERE state = 'active' AND next_due IS NOT NULL "
            "AND next_due <= ? ORDER BY next_due LIMIT 10",
            (iso(at(14)),),
        )
    assert "entries_due" in " ".join(str(step[-1]) for step in plan)
    assert new_entry_id().startswith("c_")
    assert len(new_entry_id()) == 12


async def test_a_slot_is_recorded_once_and_an_advance_needs_the_slot_it_expects(tmp_path: Path) -> None:
    async with open_database(tmp_path / "cron.db") as db:
        store = CronStore(db)
        row = entry()
        async with store.writing() as w:
            await w.insert_entry(row)
            first = await w.insert_fire(
                row.id, at(13), at(13), status="pending", reason="schedule", now=at(13)
            )
            again = await w.insert_fire(
                row.id, at(13), at(13), status="pending", reason="schedule", now=at(13)
            )
            await w.insert_missed(
                row.id, [(at(13), at(13)), (at(14), at(14))], status="missed", reason="downtime", now=at(15)
            )
            moved = await w.advance(row.id, at(13), at(15), at(15))
            stale = await w.advance(row.id, at(13), at(16), at(16))
            wrong_state = await w.advance(row.id, at(15), at(16), at(16), from_states=("paused",))
        fires = await store.fires(entry_id=row.id)
        current = await store.entry(row.id)
    assert (first, again, moved, stale, wrong_state) == (1, None, True, False, False)
    assert [(f.slot, f.status) for f in fires] == [(at(14), "missed"), (at(13), "pending")]
    assert current is not None
    assert current.next_slot == at(15)


async def test_purge_keeps_recent_history_and_each_entry_s_newest_fire(tmp_path: Path) -> None:
    old = START - timedelta(days=10)
    async with open_database(tmp_path / "cron.db") as db:
        store = CronStore(db)
        live, done, failed = (
            entry(),
            entry(state="done", finished_at=old),
            entry(state="failed", finished_at=old),
        )
        async with store.writing() as w:
            for row in (live, done, failed):
                await w.insert_entry(row)
            for hours in (1, 2, 3):
                await w.insert_missed(
                    live.id,
                    [(old + timedelta(hours=hours),) * 2],
                    status="missed",
                    reason="downtime",
                    now=old,
                )
        removed = await store.purge(
            done_before=START - timedelta(days=1), history_before=START - timedelta(days=7)
        )
        left = await store.fires(entry_id=live.id)
        remaining = [row.id for row in await store.entries(include_finished=True)]
    assert removed == 4
    assert [fire.slot for fire in left] == [old + timedelta(hours=3)]
    assert remaining == [live.id]


def test_times_are_fixed_width_utc_text() -> None:
    local = START.astimezone(ZoneInfo("Asia/Tokyo"))
    assert iso(local) == "2026-11-21T12:00:00.000000+00:00"
    assert len(iso(local + timedelta(microseconds=7))) == len(iso(local))
    assert parse_time(iso(START)) == START
