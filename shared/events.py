"""The durable event log every event-originating server keeps in its own SQLite file.

An event (an inbound chat message, a permission verdict, a cron fire, ...) is written here before
the outside world is acknowledged, gets a sequence number, is unique on the platform's dedupe key,
and stays until the orchestrator acknowledges it. No MCP imports: the wire binding lives in
``shared.protocol.events``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from shared.db import Database, Migration

DEFAULT_MAX_PENDING = 10_000
MAX_PULL = 500


def _create_events(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            dedupe_key TEXT NOT NULL UNIQUE,
            payload TEXT NOT NULL,
            created_at REAL NOT NULL,
            deliveries INTEGER NOT NULL DEFAULT 0,
            acked_at REAL
        )
        """
    )
    conn.execute("CREATE INDEX events_pending ON events(seq) WHERE acked_at IS NULL")


def _add_dead_letters(conn: sqlite3.Connection) -> None:
    # A dead event is kept, out of the pull, until the operator replays or purges it.
    conn.execute("ALTER TABLE events ADD COLUMN dead_at REAL")
    conn.execute("ALTER TABLE events ADD COLUMN dead_reason TEXT")
    conn.execute("CREATE INDEX events_dead ON events(seq) WHERE dead_at IS NOT NULL")


EVENTS_MIGRATIONS: tuple[Migration, ...] = (
    Migration("events_0001_create", _create_events),
    Migration("events_0002_dead_letters", _add_dead_letters),
)
"""Add these to a server's migration list to give it an event log."""


class EventLogFull(Exception):
    """The log holds its maximum of unacknowledged events; the producer must not acknowledge upstream."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    kind: str
    dedupe_key: str
    payload: dict[str, Any]
    created_at: float
    deliveries: int


@dataclass(frozen=True, slots=True)
class DeadEvent:
    seq: int
    kind: str
    dedupe_key: str
    payload: dict[str, Any]
    created_at: float
    deliveries: int
    dead_at: float
    reason: str


@dataclass(frozen=True, slots=True)
class Appended:
    seq: int
    created: bool
    """False when the dedupe key was already present: the platform redelivered it."""


class EventLog:
    """Append, long-poll pull and ack over one ``events`` table."""

    def __init__(
        self,
        db: Database,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        clock: Callable[[], float] = time.time,
        durable_delivery_count: bool = True,
    ) -> None:
        """``durable_delivery_count=False`` does not wait for the disk when a pull counts a delivery:
        for logs whose consumer never reads ``deliveries`` (chat messages, deduped by their reply's
        outbox key), it takes a disk wait off every message's way to the orchestrator. Keep it for
        a consumer that tells a redelivery by the count (cron fires)."""
        self._db = db
        self._max_pending = max_pending
        self._clock = clock
        self._durable_delivery_count = durable_delivery_count
        self._changed = anyio.Event()

    @property
    def database(self) -> Database:
        return self._db

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def append(self, kind: str, dedupe_key: str, payload: dict[str, Any]) -> Appended:
        async with self._db.transaction() as tx:
            row = await tx.fetchone("SELECT seq FROM events WHERE dedupe_key = ?", (dedupe_key,))
            if row is not None:
                return Appended(seq=int(row[0]), created=False)
            pending = await tx.fetchone("SELECT count(*) FROM events WHERE acked_at IS NULL")
            if pending is not None and int(pending[0]) >= self._max_pending:
                raise EventLogFull(
                    f"{self._max_pending} events are waiting for the orchestrator; "
                    "is `nexo run` running? Raise the server's max_pending setting to queue more"
                )
            seq = await tx.insert(
                "INSERT INTO events(kind, dedupe_key, payload, created_at) VALUES (?, ?, ?, ?)",
                (kind, dedupe_key, json.dumps(payload, ensure_ascii=False), self._clock()),
            )
        self._wake()
        return Appended(seq=seq, created=True)

    async def pending_count(self) -> int:
        row = await self._db.fetchone(
            "SELECT count(*) FROM events WHERE acked_at IS NULL AND dead_at IS NULL"
        )
        return int(row[0]) if row else 0

    # -- dead letters --------------------------------------------------------------------------

    async def dead_letter(self, seq: int, reason: str) -> bool:
        """Take an unacknowledged event out of the pull; False when it is unknown or already handled."""
        changed = await self._db.execute(
            "UPDATE events SET dead_at = ?, dead_reason = ? "
            "WHERE seq = ? AND acked_at IS NULL AND dead_at IS NULL",
            (self._clock(), reason[:2000], seq),
        )
        return changed == 1

    async def dead(self, limit: int = 100) -> list[DeadEvent]:
        rows = await self._db.fetchall(
            "SELECT seq, kind, dedupe_key, payload, created_at, deliveries, dead_at, dead_reason FROM events "
            "WHERE dead_at IS NOT NULL AND acked_at IS NULL ORDER BY seq LIMIT ?",
            (min(limit, MAX_PULL),),
        )
        return [
            DeadEvent(
                seq=int(r[0]),
                kind=str(r[1]),
                dedupe_key=str(r[2]),
                payload=json.loads(r[3]),
                created_at=float(r[4]),
                deliveries=int(r[5]),
                dead_at=float(r[6]),
                reason=str(r[7] or ""),
            )
            for r in rows
        ]

    async def replay(self, seqs: Sequence[int]) -> int:
        """Hand dead events out again, as new events at the end of the log (readers keep a cursor)."""
        replayed = 0
        async with self._db.transaction() as tx:
            for seq in seqs:
                row = await tx.fetchone(
                    "SELECT kind, dedupe_key, payload, created_at FROM events "
                    "WHERE seq = ? AND dead_at IS NOT NULL AND acked_at IS NULL",
                    (seq,),
                )
                if row is None:
                    continue
                await tx.execute("DELETE FROM events WHERE seq = ?", (seq,))
                await tx.insert(
                    "INSERT INTO events(kind, dedupe_key, payload, created_at) VALUES (?, ?, ?, ?)", row
                )
                replayed += 1
        if replayed:
            self._wake()
        return replayed

    async def purge_dead(self) -> int:
        """Drop every dead event for good (it is marked acknowledged, so its dedupe key still holds)."""
        return await self._db.execute(
            "UPDATE events SET acked_at = ? WHERE dead_at IS NOT NULL AND acked_at IS NULL", (self._clock(),)
        )

    async def _select(self, after: int, limit: int, kinds: Sequence[str] | None) -> list[StoredEvent]:
        sql = "SELECT seq, kind, dedupe_key, payload, created_at, deliveries FROM events "
        sql += "WHERE acked_at IS NULL AND dead_at IS NULL AND seq > ?"
        params: list[Any] = [after]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        sql += " ORDER BY seq LIMIT ?"
        params.append(min(limit, MAX_PULL))
        rows = await self._db.fetchall(sql, params)
        return [
            StoredEvent(
                seq=int(r[0]),
                kind=str(r[1]),
                dedupe_key=str(r[2]),
                payload=json.loads(r[3]),
                created_at=float(r[4]),
                deliveries=int(r[5]) + 1,
            )
            for r in rows
        ]

    async def pull(
        self, *, after: int = 0, limit: int = 100, wait_s: float = 0.0, kinds: Sequence[str] | None = None
    ) -> list[StoredEvent]:
        """Unacknowledged events with ``seq > after``, waiting up to ``wait_s`` for the first one."""
        # The first look is outside the timeout so a zero wait still answers; the signal is taken
        # before each look so an append between the look and the wait is not missed.
        changed = self._changed
        events = await self._select(after, limit, kinds)
        if not events and wait_s > 0:
            with anyio.move_on_after(wait_s):
                while not events:
                    await changed.wait()
                    changed = self._changed
                    events = await self._select(after, limit, kinds)
        if not events:
            return []
        await self._db.execute(
            f"UPDATE events SET deliveries = deliveries + 1 WHERE seq IN ({','.join('?' * len(events))})",
            [e.seq for e in events],
            durable=self._durable_delivery_count,
        )
        return events

    async def ack(self, seqs: Sequence[int]) -> int:
        """Mark events handled. Not waited to disk: a killed process keeps it, and should a power cut
        undo it, the events are handed out again and the consumer's own dedupe (the outbox key of
        a reply) keeps them from taking effect twice."""
        if not seqs:
            return 0
        return await self._db.execute(
            f"UPDATE events SET acked_at = ? WHERE acked_at IS NULL AND seq IN ({','.join('?' * len(seqs))})",
            [self._clock(), *seqs],
            durable=False,
        )

    async def purge_acked(self, older_than_s: float) -> int:
        """Forget acknowledged events; their dedupe keys stop protecting against redelivery after this."""
        cutoff = self._clock() - older_than_s
        return await self._db.execute(
            "DELETE FROM events WHERE acked_at IS NOT NULL AND acked_at < ?", (cutoff,)
        )
