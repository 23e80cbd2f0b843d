"""The webhook server's SQLite file: durable inbound events, delivery fingerprints, the outbox.

No MCP imports. A delivery is claimed (its body's SHA-256 under its dedupe key) before its event
is appended, each in its own transaction: a crash between the two leaves a claim whose retry,
with the same body, goes on to append; a different body under a claimed id is a conflict.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from shared.channelkit.outbox import OUTBOX_MIGRATIONS, Outbox
from shared.db import Database, Migration
from shared.events import EVENTS_MIGRATIONS, EventLog

Recorded = Literal["stored", "duplicate", "conflict"]


def _create_deliveries(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE webhook_deliveries (
            dedupe_key TEXT PRIMARY KEY,
            source TEXT NOT NULL,
            body_sha256 TEXT NOT NULL,
            first_seen REAL NOT NULL
        ) WITHOUT ROWID
        """
    )
    conn.execute("CREATE INDEX webhook_deliveries_body ON webhook_deliveries(source, body_sha256)")


MIGRATIONS: tuple[Migration, ...] = (
    *EVENTS_MIGRATIONS,
    *OUTBOX_MIGRATIONS,
    Migration("webhook_0001_deliveries", _create_deliveries),
)


@dataclass(frozen=True, slots=True)
class Claim:
    """One delivery to record: where it came from, its dedupe key and its body's fingerprint."""

    source: str
    dedupe_key: str
    body_sha256: str
    unique_body: bool
    """Treat the same body under another delivery id as a replay (the id is not signed)."""


class WebhookStore:
    def __init__(self, db: Database, events: EventLog, outbox: Outbox, clock: Callable[[], float]) -> None:
        self.db = db
        self.events = events
        self.outbox = outbox
        self._clock = clock

    async def _claim(self, claim: Claim) -> Recorded | None:
        async with self.db.transaction() as tx:
            row = await tx.fetchone(
                "SELECT body_sha256 FROM webhook_deliveries WHERE dedupe_key = ?", (claim.dedupe_key,)
            )
            if row is not None:
                return None if row[0] == claim.body_sha256 else "conflict"
            if claim.unique_body:
                seen = await tx.fetchone(
                    "SELECT 1 FROM webhook_deliveries WHERE source = ? AND body_sha256 = ?",
                    (claim.source, claim.body_sha256),
                )
                if seen is not None:
                    return "duplicate"
            await tx.execute(
                "INSERT INTO webhook_deliveries(dedupe_key, source, body_sha256, first_seen) "
                "VALUES (?, ?, ?, ?)",
                (claim.dedupe_key, claim.source, claim.body_sha256, self._clock()),
            )
        return None

    async def record(self, claim: Claim, kind: str, payload: dict[str, Any]) -> tuple[Recorded, int | None]:
        """Store the event once; ``(outcome, seq)``. Raises ``EventLogFull`` when the log is full."""
        refused = await self._claim(claim)
        if refused is not None:
            return refused, None
        appended = await self.events.append(kind, claim.dedupe_key, payload)
        return ("stored" if appended.created else "duplicate"), appended.seq


@asynccontextmanager
async def open_store(
    path: Path, *, max_pending: int, clock: Callable[[], float] = time.time
) -> AsyncIterator[WebhookStore]:
    async with Database.open(path, MIGRATIONS, synchronous="FULL", inline=True) as db:
        events = EventLog(db, max_pending=max_pending, clock=clock)
        yield WebhookStore(db, events, Outbox(db, clock=clock), clock)
