"""The console's SQLite file: durable inbound events and the outbox. No MCP imports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from shared.channelkit.outbox import OUTBOX_MIGRATIONS, Outbox
from shared.db import Database
from shared.events import EVENTS_MIGRATIONS, EventLog

MIGRATIONS = (*EVENTS_MIGRATIONS, *OUTBOX_MIGRATIONS)


@dataclass(frozen=True, slots=True)
class ConsoleStore:
    db: Database
    events: EventLog
    outbox: Outbox


@asynccontextmanager
async def open_store(path: Path, *, max_pending: int) -> AsyncIterator[ConsoleStore]:
    async with Database.open(path, MIGRATIONS, synchronous="FULL", inline=True) as db:
        # Chat messages are deduped by their reply's outbox key, never by their delivery count.
        events = EventLog(db, max_pending=max_pending, durable_delivery_count=False)
        yield ConsoleStore(db=db, events=events, outbox=Outbox(db))
