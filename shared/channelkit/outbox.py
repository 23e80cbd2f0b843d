"""The outbound half of a channel server: an idempotent outbox in the server's SQLite file.

States: pending -> sending -> sent (with the provider's id) | uncertain | failed. A send that was
in flight when the process died becomes ``uncertain`` and is reported, never blindly retried.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from shared.db import Database, Migration

OutboxStatus = Literal["pending", "sending", "sent", "uncertain", "failed"]


def _create_outbox(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            idempotency_key TEXT NOT NULL UNIQUE,
            chat_id TEXT NOT NULL,
            text TEXT NOT NULL,
            reply_to TEXT,
            status TEXT NOT NULL,
            provider_id TEXT,
            error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX outbox_open ON outbox(chat_id, id) WHERE status IN ('pending', 'sending')")


def _add_notice(conn: sqlite3.Connection) -> None:
    # A notice (status line, not an answer) must still look like one when delivered later.
    conn.execute("ALTER TABLE outbox ADD COLUMN notice INTEGER NOT NULL DEFAULT 0")


def _add_file(conn: sqlite3.Connection) -> None:
    # A file goes through the same outbox as text: its caption is the entry's text.
    conn.execute("ALTER TABLE outbox ADD COLUMN file_path TEXT")
    conn.execute("ALTER TABLE outbox ADD COLUMN mime TEXT")


OUTBOX_MIGRATIONS: tuple[Migration, ...] = (
    Migration("outbox_0001_create", _create_outbox),
    Migration("outbox_0002_notice", _add_notice),
    Migration("outbox_0003_file", _add_file),
)


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    id: int
    idempotency_key: str
    chat_id: str
    text: str
    reply_to: str | None
    status: OutboxStatus
    provider_id: str | None
    error: str | None
    notice: bool = False
    file_path: str | None = None
    """The file to send (resolved inside the workspace when queued); ``text`` is its caption."""
    mime: str | None = None


_COLUMNS = "id, idempotency_key, chat_id, text, reply_to, status, provider_id, error, notice, file_path, mime"


def _entry(row: tuple[object, ...]) -> OutboxEntry:
    return OutboxEntry(
        id=int(str(row[0])),
        idempotency_key=str(row[1]),
        chat_id=str(row[2]),
        text=str(row[3]),
        reply_to=None if row[4] is None else str(row[4]),
        status=str(row[5]),  # type: ignore[arg-type]
        provider_id=None if row[6] is None else str(row[6]),
        error=None if row[7] is None else str(row[7]),
        notice=bool(row[8]),
        file_path=None if row[9] is None else str(row[9]),
        mime=None if row[10] is None else str(row[10]),
    )


@dataclass(frozen=True, slots=True)
class Begun:
    entry: OutboxEntry
    created: bool
    """False when the idempotency key was seen before: the caller must not send again."""


class Outbox:
    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def begin(
        self,
        idempotency_key: str,
        chat_id: str,
        text: str,
        reply_to: str | None,
        *,
        status: OutboxStatus = "sending",
        notice: bool = False,
        file_path: str | None = None,
        mime: str | None = None,
    ) -> Begun:
        now = self._clock()
        async with self._db.transaction() as tx:
            row = await tx.fetchone(
                f"SELECT {_COLUMNS} FROM outbox WHERE idempotency_key = ?", (idempotency_key,)
            )
            if row is not None:
                return Begun(_entry(row), created=False)
            new_id = await tx.insert(
                "INSERT INTO outbox(idempotency_key, chat_id, text, reply_to, status, created_at, "
                "updated_at, notice, file_path, mime) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (idempotency_key, chat_id, text, reply_to, status, now, now, int(notice), file_path, mime),
            )
            created = await tx.fetchone(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (new_id,))
        assert created is not None
        return Begun(_entry(created), created=True)

    async def _set(
        self,
        entry_id: int,
        status: OutboxStatus,
        provider_id: str | None,
        error: str | None,
        *,
        durable: bool = True,
    ) -> None:
        await self._db.execute(
            "UPDATE outbox SET status = ?, provider_id = coalesce(?, provider_id), error = ?, updated_at = ? "
            "WHERE id = ?",
            (status, provider_id, error, self._clock(), entry_id),
            durable=durable,
        )

    async def mark_sent(self, entry_id: int, provider_id: str) -> None:
        # Not waited to disk: should a power cut undo it, the entry is back to `sending`, which a
        # restart makes `uncertain` (reported, never sent again), so nothing is shown twice.
        await self._set(entry_id, "sent", provider_id, None, durable=False)

    async def mark_sending(self, entry_id: int) -> None:
        """Just before handing a queued entry to the platform: a crash now makes it uncertain."""
        await self._set(entry_id, "sending", None, None)

    async def mark_pending(self, entry_id: int) -> None:
        await self._set(entry_id, "pending", None, None)

    async def mark_failed(self, entry_id: int, error: str) -> None:
        await self._set(entry_id, "failed", None, error)

    async def get(self, entry_id: int) -> OutboxEntry | None:
        row = await self._db.fetchone(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (entry_id,))
        return None if row is None else _entry(row)

    async def pending(self, chat_id: str) -> list[OutboxEntry]:
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM outbox WHERE chat_id = ? AND status = 'pending' ORDER BY id", (chat_id,)
        )
        return [_entry(r) for r in rows]

    async def chats_waiting(self) -> list[str]:
        """Chats with queued messages, the one waiting longest first."""
        rows = await self._db.fetchall(
            "SELECT chat_id FROM outbox WHERE status = 'pending' GROUP BY chat_id ORDER BY MIN(id)"
        )
        return [str(row[0]) for row in rows]

    async def uncertain(self) -> list[OutboxEntry]:
        rows = await self._db.fetchall(
            f"SELECT {_COLUMNS} FROM outbox WHERE status = 'uncertain' ORDER BY id"
        )
        return [_entry(r) for r in rows]

    async def recover(self) -> list[OutboxEntry]:
        """After a restart: sends that were in flight are now of unknown outcome."""
        rows = await self._db.fetchall(f"SELECT {_COLUMNS} FROM outbox WHERE status = 'sending' ORDER BY id")
        if rows:
            await self._db.execute(
                "UPDATE outbox SET status = 'uncertain', error = 'interrupted by a restart', updated_at = ? "
                "WHERE status = 'sending'",
                (self._clock(),),
            )
        return [_entry(r) for r in rows]
