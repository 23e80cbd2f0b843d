"""What the WhatsApp channel keeps besides the kit's event log and outbox (its own SQLite file).

- ``contacts``: when each contact last wrote, which opens the 24-hour customer-service window;
- ``parts``: the platform id of every part of every message sent, mapped to the id the outbox
  records for the whole message, so a status callback about any part finds its outbox entry;
- ``media_content``: the content built for a media message once its file is saved, so a
  redelivered message is not downloaded (and saved) again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from shared.db import Database, Migration

MIGRATIONS = (
    Migration.sql(
        "whatsapp_0001_create",
        """
        CREATE TABLE contacts (wa_id TEXT PRIMARY KEY, last_inbound_at REAL NOT NULL);
        CREATE TABLE parts (
            platform_id TEXT PRIMARY KEY,
            message_key TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            part INTEGER NOT NULL
        );
        """,
    ),
    Migration.sql(
        "whatsapp_0002_media",
        "CREATE TABLE media_content (message_id TEXT PRIMARY KEY, content TEXT NOT NULL)",
    ),
)


class PlatformStore:
    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    async def wrote(self, wa_id: str, at: float) -> None:
        """A contact's message arrived (at its own timestamp, or now when it has none)."""
        await self._db.execute(
            "INSERT INTO contacts(wa_id, last_inbound_at) VALUES (?, ?) ON CONFLICT(wa_id) "
            "DO UPDATE SET last_inbound_at = max(last_inbound_at, excluded.last_inbound_at)",
            (wa_id, at or self._clock()),
        )

    async def last_inbound(self, wa_id: str) -> float | None:
        row = await self._db.fetchone("SELECT last_inbound_at FROM contacts WHERE wa_id = ?", (wa_id,))
        return None if row is None else float(row[0])

    async def sent_parts(self, chat_id: str, platform_ids: list[str]) -> None:
        key = platform_ids[0]
        await self._db.executemany(
            "INSERT OR IGNORE INTO parts(platform_id, message_key, chat_id, part) VALUES (?, ?, ?, ?)",
            [(platform_id, key, chat_id, index) for index, platform_id in enumerate(platform_ids)],
        )

    async def message_key(self, platform_id: str) -> str | None:
        row = await self._db.fetchone("SELECT message_key FROM parts WHERE platform_id = ?", (platform_id,))
        return None if row is None else str(row[0])

    async def media_content(self, message_id: str) -> str | None:
        row = await self._db.fetchone("SELECT content FROM media_content WHERE message_id = ?", (message_id,))
        return None if row is None else str(row[0])

    async def saved_media(self, message_id: str, content: str) -> None:
        await self._db.execute(
            "INSERT OR IGNORE INTO media_content(message_id, content) VALUES (?, ?)", (message_id, content)
        )


@asynccontextmanager
async def open_store(path: Path, clock: Callable[[], float] = time.time) -> AsyncIterator[PlatformStore]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    async with Database.open(path, MIGRATIONS, inline=True) as db:
        yield PlatformStore(db, clock)
