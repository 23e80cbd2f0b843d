"""The pairing database: its migrations, the clock type and the stored form of a moment."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from shared.db import Migration

Clock = Callable[[], datetime]

SCHEMA = Migration.sql(
    "pairing_0001_schema",
    """
    CREATE TABLE paired (
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('dm', 'group')),
        sender TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('owner', 'contact')),
        paired_at TEXT NOT NULL,
        via TEXT NOT NULL,
        paired_by TEXT NOT NULL,
        revoked_at TEXT,
        PRIMARY KEY (channel, account, scope, sender)
    ) WITHOUT ROWID;

    CREATE TABLE pending (
        id TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        sender TEXT NOT NULL,
        display_name TEXT,
        code_hash TEXT NOT NULL,
        code_sealed BLOB,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        replies INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
        resolved_at TEXT,
        resolved_by TEXT
    );
    CREATE INDEX pending_sender ON pending(channel, account, sender, created_at);
    CREATE INDEX pending_open ON pending(channel, account, expires_at) WHERE status = 'pending';
    CREATE INDEX pending_code ON pending(code_hash);

    CREATE TABLE approve_failures (id INTEGER PRIMARY KEY, at TEXT NOT NULL);
    CREATE TABLE lockout (id INTEGER PRIMARY KEY CHECK (id = 1), until TEXT NOT NULL);
    """,
)
MIGRATIONS: tuple[Migration, ...] = (SCHEMA,)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Fixed width (microseconds, +00:00), so stored times compare correctly as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
