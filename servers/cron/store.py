"""The cron database: its schema, entry rows, the missed-event outbox, configuration, retention and
the event log's batch append. No MCP imports.

The row types and time helpers live in ``rows`` and the fire-row statements in ``fires``; this
module is where the rest of the server imports all of them from.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from servers.cron.fires import ENDED_FIRE_STATUSES, FireQueries, FireStatements
from servers.cron.rows import (
    ENTRY_COLUMNS,
    FIRE_COLUMNS,
    Clock,
    EntryRow,
    FireRow,
    column_value,
    iso,
    new_entry_id,
    parse_time,
    placeholders,
    to_entry,
    to_fire,
    utc_now,
)
from shared.db import Database, Migration, Transaction
from shared.events import EVENTS_MIGRATIONS, EventLog

__all__ = [
    "ENDED_FIRE_STATUSES",
    "ENTRY_COLUMNS",
    "FIRE_COLUMNS",
    "MIGRATIONS",
    "SCHEMA",
    "UPDATABLE",
    "Clock",
    "CronEventLog",
    "CronStore",
    "EntryRow",
    "FireRow",
    "Writer",
    "iso",
    "new_entry_id",
    "open_database",
    "parse_time",
    "to_entry",
    "to_fire",
    "utc_now",
]

UPDATABLE = frozenset(
    {
        "agent", "schedule_kind", "spec", "timezone", "anchor", "recurring", "text", "channel",
        "recipient", "misfire", "grace_s", "overlap", "state", "next_slot", "next_due", "finished_at",
    }
)  # fmt: skip


SCHEMA = """
CREATE TABLE entries (
    id TEXT PRIMARY KEY,
    binding TEXT NOT NULL,
    agent TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('prompt', 'reminder', 'agent_turn')),
    schedule_kind TEXT NOT NULL CHECK (schedule_kind IN ('cron', 'interval', 'once')),
    spec TEXT NOT NULL,
    timezone TEXT NOT NULL,
    anchor TEXT NOT NULL,
    recurring INTEGER NOT NULL,
    text TEXT NOT NULL,
    channel TEXT,
    recipient TEXT,
    provider TEXT,
    model TEXT,
    misfire TEXT NOT NULL CHECK (misfire IN ('park', 'skip', 'catch_up_once', 'all')),
    grace_s REAL NOT NULL,
    overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'allow')),
    permanent INTEGER NOT NULL,
    state TEXT NOT NULL
        CHECK (state IN ('active', 'paused', 'parked', 'done', 'failed', 'expired')),
    next_slot TEXT,
    next_due TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX entries_due ON entries(next_due) WHERE state = 'active' AND next_due IS NOT NULL;
CREATE INDEX entries_binding ON entries(binding, created_at);
CREATE INDEX entries_finished ON entries(finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE fires (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    slot TEXT NOT NULL,
    due_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'done', 'failed', 'skipped',
        'missed', 'skipped_overlap', 'retrying')),
    attempt INTEGER NOT NULL DEFAULT 1,
    manual INTEGER NOT NULL DEFAULT 0,
    reason TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    retry_at TEXT,
    UNIQUE (entry_id, slot)
);
CREATE INDEX fires_pending ON fires(id) WHERE status = 'pending';
CREATE INDEX fires_retry ON fires(retry_at) WHERE status = 'retrying';
CREATE INDEX fires_open ON fires(entry_id, created_at) WHERE status IN ('pending', 'delivered', 'retrying');
CREATE INDEX fires_entry ON fires(entry_id, id);
CREATE INDEX fires_created ON fires(created_at);
CREATE TABLE missed_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

MIGRATIONS: tuple[Migration, ...] = (*EVENTS_MIGRATIONS, Migration.sql("cron_0001_create", SCHEMA))


@asynccontextmanager
async def open_database(path: Path) -> AsyncIterator[Database]:
    """The cron file with ``synchronous=FULL``: a created entry and a recorded fire survive a power cut."""
    async with Database.open(path, MIGRATIONS, synchronous="FULL", inline=True) as db:
        yield db


class Writer(FireStatements):
    """The statements of one write transaction (those on fire rows come from ``FireStatements``)."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx

    async def entry(self, entry_id: str) -> EntryRow | None:
        row = await self.tx.fetchone(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        return None if row is None else to_entry(row)

    async def insert_entry(self, entry: EntryRow) -> None:
        await self.tx.execute(
            f"INSERT INTO entries({ENTRY_COLUMNS}) VALUES ({placeholders(23)})", entry.values()
        )

    async def update_entry(self, entry_id: str, **changes: Any) -> None:
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise AssertionError(f"not updatable entry columns: {sorted(unknown)}")
        values = [column_value(value) for value in changes.values()]
        assignments = ", ".join(f"{name} = ?" for name in changes)
        await self.tx.execute(f"UPDATE entries SET {assignments} WHERE id = ?", [*values, entry_id])

    async def advance(
        self,
        entry_id: str,
        expected_slot: datetime | None,
        next_slot: datetime | None,
        next_due: datetime | None,
        *,
        from_states: Sequence[str] = ("active",),
        **changes: Any,
    ) -> bool:
        """Move the entry to its next slot (with other column changes) if it is still in one of
        ``from_states`` at ``expected_slot``; False when it changed since it was read."""
        columns = {"next_slot": next_slot, "next_due": next_due, **changes}
        unknown = set(columns) - UPDATABLE
        if unknown:
            raise AssertionError(f"not updatable entry columns: {sorted(unknown)}")
        assignments = ", ".join(f"{name} = ?" for name in columns)
        changed = await self.tx.execute(
            f"UPDATE entries SET {assignments} WHERE id = ? AND next_slot IS ? "
            f"AND state IN ({placeholders(len(from_states))})",
            [
                *(column_value(value) for value in columns.values()),
                entry_id,
                None if expected_slot is None else iso(expected_slot),
                *from_states,
            ],
        )
        return changed == 1

    async def delete_entry(self, entry_id: str) -> bool:
        return await self.tx.execute("DELETE FROM entries WHERE id = ?", (entry_id,)) == 1

    async def count_unfinished(self, binding: str) -> int:
        row = await self.tx.fetchone(
            "SELECT count(*) FROM entries WHERE binding = ? AND permanent = 0 "
            "AND state IN ('active', 'paused', 'parked')",
            (binding,),
        )
        return int(row[0]) if row else 0

    async def entries_with_prefix(self, prefix: str) -> list[EntryRow]:
        rows = await self.tx.fetchall(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE substr(id, 1, ?) = ?", (len(prefix), prefix)
        )
        return [to_entry(row) for row in rows]

    async def add_outbox(self, payload: Mapping[str, Any], now: datetime) -> int:
        return await self.tx.insert(
            "INSERT INTO missed_outbox(payload, created_at) VALUES (?, ?)",
            (json.dumps(dict(payload), ensure_ascii=False), iso(now)),
        )

    async def drop_outbox(self, outbox_ids: Sequence[int]) -> None:
        if outbox_ids:
            await self.tx.execute(
                f"DELETE FROM missed_outbox WHERE id IN ({placeholders(len(outbox_ids))})", list(outbox_ids)
            )

    async def set_config(self, key: str, value: Mapping[str, Any]) -> None:
        await self.tx.execute(
            "INSERT INTO config(key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(dict(value), sort_keys=True)),
        )


class CronStore(FireQueries):
    """Reads outside a write transaction, and ``writing()`` for one (fire reads come from
    ``FireQueries``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[Writer]:
        async with self.db.transaction() as tx:
            yield Writer(tx)

    # -- entries ---------------------------------------------------------------------------------

    async def entry(self, entry_id: str) -> EntryRow | None:
        row = await self.db.fetchone(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        return None if row is None else to_entry(row)

    async def entries(self, *, binding: str | None = None, include_finished: bool = False) -> list[EntryRow]:
        """Oldest first."""
        where: list[str] = []
        params: list[Any] = []
        if binding is not None:
            where.append("binding = ?")
            params.append(binding)
        if not include_finished:
            where.append("state IN ('active', 'paused', 'parked')")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.db.fetchall(
            f"SELECT {ENTRY_COLUMNS} FROM entries {clause} ORDER BY created_at, id", params
        )
        return [to_entry(row) for row in rows]

    async def due_entries(self, now: datetime, limit: int) -> list[EntryRow]:
        """Active entries whose next due time has come, earliest first (through the due index)."""
        rows = await self.db.fetchall(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE state = 'active' AND next_due IS NOT NULL "
            "AND next_due <= ? ORDER BY next_due LIMIT ?",
            (iso(now), limit),
        )
        return [to_entry(row) for row in rows]

    async def earliest_due(self) -> datetime | None:
        row = await self.db.fetchone(
            "SELECT next_due FROM entries WHERE state = 'active' AND next_due IS NOT NULL "
            "ORDER BY next_due LIMIT 1"
        )
        return None if row is None else parse_time(row[0])

    async def unfinished_entries(self) -> list[EntryRow]:
        rows = await self.db.fetchall(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE state IN ('active', 'paused', 'parked') "
            "AND permanent = 0"
        )
        return [to_entry(row) for row in rows]

    async def set_due(self, changes: Sequence[tuple[datetime, str]]) -> None:
        """(new due, entry id) pairs, in one transaction."""
        await self.db.executemany(
            "UPDATE entries SET next_due = ? WHERE id = ?",
            [(iso(due), entry_id) for due, entry_id in changes],
        )

    # -- missed-event outbox ---------------------------------------------------------------------

    async def outbox(self, limit: int) -> list[tuple[int, dict[str, Any]]]:
        rows = await self.db.fetchall("SELECT id, payload FROM missed_outbox ORDER BY id LIMIT ?", (limit,))
        return [(int(row[0]), json.loads(row[1])) for row in rows]

    # -- configuration and retention -------------------------------------------------------------

    async def config(self, key: str) -> dict[str, Any]:
        row = await self.db.fetchone("SELECT value FROM config WHERE key = ?", (key,))
        return {} if row is None else dict(json.loads(row[0]))

    async def purge(self, *, done_before: datetime, history_before: datetime) -> int:
        """Delete finished one-shots (done) and their fires, old failed and expired entries, and
        ended fire rows older than the history (each entry keeps its newest row). Returns rows removed."""
        removed = 0
        async with self.db.transaction() as tx:
            removed += await tx.execute(
                "DELETE FROM entries WHERE state = 'done' AND finished_at < ?", (iso(done_before),)
            )
            removed += await tx.execute(
                "DELETE FROM entries WHERE state IN ('failed', 'expired') AND finished_at < ?",
                (iso(history_before),),
            )
            removed += await tx.execute(
                f"DELETE FROM fires WHERE created_at < ? AND status IN ({placeholders(5)}) "
                "AND id NOT IN (SELECT max(id) FROM fires GROUP BY entry_id)",
                (iso(history_before), *ENDED_FIRE_STATUSES),
            )
        return removed


class CronEventLog(EventLog):
    """The server's event log, plus a batch append that records the delivery in the cron tables in
    the same transaction: one commit (one fsync) for a whole batch of fires instead of two per fire.

    It keeps ``EventLog.append``'s rules: an event whose dedupe key is present is not added again,
    and no event is added while ``max_pending`` events wait for their acknowledgement.
    """

    def __init__(self, db: Database, *, max_pending: int, clock: Callable[[], float] = time.time) -> None:
        super().__init__(db, max_pending=max_pending, clock=clock)
        self._batch_db = db
        self._cap = max_pending
        self._stamp = clock

    async def append_batch(
        self,
        kind: str,
        items: Sequence[tuple[str, Mapping[str, Any]]],
        *,
        then: Callable[[Transaction, int], Awaitable[None]],
    ) -> int:
        """Append (dedupe key, payload) items in order until the cap, then call ``then(tx, n)`` with
        how many went in (also those already present), inside the same transaction. Returns n."""
        added = 0
        async with self._batch_db.transaction() as tx:
            row = await tx.fetchone("SELECT count(*) FROM events WHERE acked_at IS NULL")
            room = self._cap - (int(row[0]) if row else 0)
            count = 0
            for key, payload in items:
                if room <= 0:
                    if await tx.fetchone("SELECT 1 FROM events WHERE dedupe_key = ?", (key,)) is None:
                        break
                else:
                    inserted = await tx.execute(
                        "INSERT INTO events(kind, dedupe_key, payload, created_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (dedupe_key) DO NOTHING",
                        (kind, key, json.dumps(dict(payload), ensure_ascii=False), self._stamp()),
                    )
                    room -= inserted
                    added += inserted
                count += 1
            await then(tx, count)
        if added:
            self._wake()
        return count
