"""Entries, fire rows and the missed-event outbox in SQLite. No MCP imports.

Times are stored as fixed-width ISO 8601 text in UTC (microseconds, ``+00:00``), so they compare
correctly as text and the due index orders them. Fire rows are unique on (entry, slot): whatever
happens to the process, a slot is recorded at most once.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from servers.cron.schedule import Schedule
from shared.db import Database, Migration, Transaction
from shared.events import EVENTS_MIGRATIONS, EventLog

Clock = Callable[[], datetime]

ENTRY_COLUMNS = (
    "id, binding, agent, kind, schedule_kind, spec, timezone, anchor, recurring, text, channel, "
    "recipient, provider, model, misfire, grace_s, overlap, permanent, state, next_slot, next_due, "
    "created_at, finished_at"
)
FIRE_COLUMNS = (
    "id, entry_id, slot, due_at, status, attempt, manual, reason, error, created_at, finished_at, retry_at"
)
UPDATABLE = frozenset(
    {
        "agent", "schedule_kind", "spec", "timezone", "anchor", "recurring", "text", "channel",
        "recipient", "misfire", "grace_s", "overlap", "state", "next_slot", "next_due", "finished_at",
    }
)  # fmt: skip
ENDED_FIRE_STATUSES = ("done", "failed", "skipped", "missed", "skipped_overlap")


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Fixed width (microseconds, +00:00), so stored times compare correctly as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _maybe_time(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text)


def _maybe_iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def new_entry_id() -> str:
    """``c_`` and ten base32 characters (50 random bits)."""
    return "c_" + base64.b32encode(secrets.token_bytes(10)).decode()[:10].lower()


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
            _maybe_iso(self.next_slot),
            _maybe_iso(self.next_due),
            iso(self.created_at),
            _maybe_iso(self.finished_at),
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
        next_slot=_maybe_time(row[19]),
        next_due=_maybe_time(row[20]),
        created_at=parse_time(row[21]),
        finished_at=_maybe_time(row[22]),
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
        finished_at=_maybe_time(row[10]),
        retry_at=_maybe_time(row[11]),
    )


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
    async with Database.open(path, MIGRATIONS, synchronous="FULL") as db:
        yield db


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


class Writer:
    """The statements of one write transaction."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx

    async def entry(self, entry_id: str) -> EntryRow | None:
        row = await self.tx.fetchone(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        return None if row is None else to_entry(row)

    async def insert_entry(self, entry: EntryRow) -> None:
        await self.tx.execute(
            f"INSERT INTO entries({ENTRY_COLUMNS}) VALUES ({_placeholders(23)})", entry.values()
        )

    async def update_entry(self, entry_id: str, **changes: Any) -> None:
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise AssertionError(f"not updatable entry columns: {sorted(unknown)}")
        values = [_column_value(value) for value in changes.values()]
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
            f"AND state IN ({_placeholders(len(from_states))})",
            [
                *(_column_value(value) for value in columns.values()),
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

    async def insert_fire(
        self,
        entry_id: str,
        slot: datetime,
        due_at: datetime,
        *,
        status: str,
        reason: str,
        now: datetime,
        manual: bool = False,
    ) -> int | None:
        """The new row's id; None when the slot already has a row (nothing is written)."""
        row = await self.tx.fetchone(
            "INSERT INTO fires(entry_id, slot, due_at, status, manual, reason, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (entry_id, slot) DO NOTHING RETURNING id",
            (entry_id, iso(slot), iso(due_at), status, int(manual), reason, iso(now)),
        )
        return None if row is None else int(row[0])

    async def insert_missed(
        self,
        entry_id: str,
        slots: Iterable[tuple[datetime, datetime]],
        *,
        status: str,
        reason: str,
        now: datetime,
    ) -> None:
        """Rows for (slot, due) pairs that did not fire, ended at once."""
        stamp = iso(now)
        await self.tx.executemany(
            "INSERT INTO fires(entry_id, slot, due_at, status, reason, created_at, finished_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (entry_id, slot) DO NOTHING",
            [(entry_id, iso(slot), iso(due), status, reason, stamp, stamp) for slot, due in slots],
        )

    async def fire(self, fire_id: int) -> FireRow | None:
        row = await self.tx.fetchone(f"SELECT {FIRE_COLUMNS} FROM fires WHERE id = ?", (fire_id,))
        return None if row is None else to_fire(row)

    async def end_fire(self, fire_id: int, status: str, *, error: str | None, now: datetime) -> None:
        await self.tx.execute(
            "UPDATE fires SET status = ?, error = ?, finished_at = ?, retry_at = NULL WHERE id = ?",
            (status, error, iso(now), fire_id),
        )

    async def schedule_retry(self, fire_id: int, *, error: str | None, retry_at: datetime) -> None:
        await self.tx.execute(
            "UPDATE fires SET status = 'retrying', error = ?, retry_at = ? WHERE id = ?",
            (error, iso(retry_at), fire_id),
        )

    async def start_retry(self, fire_id: int, due_at: datetime) -> bool:
        changed = await self.tx.execute(
            "UPDATE fires SET status = 'pending', attempt = attempt + 1, due_at = ?, retry_at = NULL "
            "WHERE id = ? AND status = 'retrying'",
            (iso(due_at), fire_id),
        )
        return changed == 1

    async def has_open_fire(self, entry_id: str, since: datetime) -> bool:
        row = await self.tx.fetchone(
            "SELECT 1 FROM fires WHERE entry_id = ? AND status IN ('pending', 'delivered', 'retrying') "
            "AND created_at >= ? LIMIT 1",
            (entry_id, iso(since)),
        )
        return row is not None

    async def add_outbox(self, payload: Mapping[str, Any], now: datetime) -> int:
        return await self.tx.insert(
            "INSERT INTO missed_outbox(payload, created_at) VALUES (?, ?)",
            (json.dumps(dict(payload), ensure_ascii=False), iso(now)),
        )

    async def mark_delivered(self, fire_ids: Sequence[int]) -> None:
        if fire_ids:
            await self.tx.execute(
                f"UPDATE fires SET status = 'delivered' WHERE status = 'pending' "
                f"AND id IN ({_placeholders(len(fire_ids))})",
                list(fire_ids),
            )

    async def drop_outbox(self, outbox_ids: Sequence[int]) -> None:
        if outbox_ids:
            await self.tx.execute(
                f"DELETE FROM missed_outbox WHERE id IN ({_placeholders(len(outbox_ids))})", list(outbox_ids)
            )

    async def set_config(self, key: str, value: Mapping[str, Any]) -> None:
        await self.tx.execute(
            "INSERT INTO config(key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(dict(value), sort_keys=True)),
        )


def _column_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, bool):
        return int(value)
    return value


class CronStore:
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

    # -- fires -----------------------------------------------------------------------------------

    async def fire(self, fire_id: int) -> FireRow | None:
        row = await self.db.fetchone(f"SELECT {FIRE_COLUMNS} FROM fires WHERE id = ?", (fire_id,))
        return None if row is None else to_fire(row)

    async def fires(
        self, *, entry_id: str | None = None, since: datetime | None = None, limit: int = 100
    ) -> list[FireRow]:
        """Newest first."""
        where: list[str] = []
        params: list[Any] = []
        if entry_id is not None:
            where.append("entry_id = ?")
            params.append(entry_id)
        if since is not None:
            where.append("created_at >= ?")
            params.append(iso(since))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.db.fetchall(
            f"SELECT {FIRE_COLUMNS} FROM fires {clause} ORDER BY id DESC LIMIT ?", [*params, limit]
        )
        return [to_fire(row) for row in rows]

    async def pending_fires(self, limit: int) -> list[FireRow]:
        """Fires recorded whose event is not known to be in the log yet, oldest first."""
        rows = await self.db.fetchall(
            f"SELECT {FIRE_COLUMNS} FROM fires WHERE status = 'pending' ORDER BY id LIMIT ?", (limit,)
        )
        return [to_fire(row) for row in rows]

    async def retries_due(self, now: datetime, limit: int) -> list[FireRow]:
        rows = await self.db.fetchall(
            f"SELECT {', '.join('f.' + c.strip() for c in FIRE_COLUMNS.split(','))} FROM fires f "
            "JOIN entries e ON e.id = f.entry_id WHERE f.status = 'retrying' AND f.retry_at <= ? "
            "AND e.state = 'active' ORDER BY f.retry_at LIMIT ?",
            (iso(now), limit),
        )
        return [to_fire(row) for row in rows]

    async def earliest_retry(self) -> datetime | None:
        row = await self.db.fetchone(
            "SELECT f.retry_at FROM fires f JOIN entries e ON e.id = f.entry_id "
            "WHERE f.status = 'retrying' AND e.state = 'active' ORDER BY f.retry_at LIMIT 1"
        )
        return None if row is None else parse_time(row[0])

    async def last_statuses(self, entry_ids: Sequence[str]) -> dict[str, str]:
        """The status of each entry's newest fire row."""
        if not entry_ids:
            return {}
        rows = await self.db.fetchall(
            "SELECT entry_id, status FROM fires WHERE id IN (SELECT max(id) FROM fires "
            f"WHERE entry_id IN ({_placeholders(len(entry_ids))}) GROUP BY entry_id)",
            list(entry_ids),
        )
        return {str(entry_id): str(status) for entry_id, status in rows}

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
                f"DELETE FROM fires WHERE created_at < ? AND status IN ({_placeholders(5)}) "
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
