"""The statements on fire rows: recording slots (fired or missed), retries, outcomes and reads.

Fire rows are unique on (entry, slot): whatever happens to the process, a slot is recorded at most
once. ``FireStatements`` is the fire part of ``store.Writer`` (one write transaction) and
``FireQueries`` the fire part of ``store.CronStore``. No MCP imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from servers.cron.rows import FIRE_COLUMNS, FireRow, iso, parse_time, placeholders, to_fire
from shared.db import Database, Transaction

ENDED_FIRE_STATUSES = ("done", "failed", "skipped", "missed", "skipped_overlap")


class FireStatements:
    """The fire-row statements of one write transaction."""

    tx: Transaction

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

    async def mark_delivered(self, fire_ids: Sequence[int]) -> None:
        if fire_ids:
            await self.tx.execute(
                f"UPDATE fires SET status = 'delivered' WHERE status = 'pending' "
                f"AND id IN ({placeholders(len(fire_ids))})",
                list(fire_ids),
            )


class FireQueries:
    """Reads of fire rows outside a write transaction."""

    db: Database

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
            f"WHERE entry_id IN ({placeholders(len(entry_ids))}) GROUP BY entry_id)",
            list(entry_ids),
        )
        return {str(entry_id): str(status) for entry_id, status in rows}
