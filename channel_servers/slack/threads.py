"""Which thread each received message belongs to, kept in the channel's SQLite file.

Replies name the chat (the Slack channel id) and the message they answer (its ``ts``); Slack wants
the thread's root ``ts`` to post into the thread. The mapping is durable, so an answer sent after a
restart, or flushed from the outbox hours later, still lands in its thread.
"""

from __future__ import annotations

from shared.db import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS slack_threads (
    channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    root TEXT NOT NULL,
    PRIMARY KEY (channel, ts)
) WITHOUT ROWID
"""


class Threads:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def open(self) -> None:
        await self._db.execute(SCHEMA)

    async def remember(self, channel: str, ts: str, root: str) -> None:
        await self._db.execute(
            "INSERT OR IGNORE INTO slack_threads (channel, ts, root) VALUES (?, ?, ?)", (channel, ts, root)
        )

    async def root(self, channel: str, ts: str) -> str | None:
        row = await self._db.fetchone(
            "SELECT root FROM slack_threads WHERE channel = ? AND ts = ?", (channel, ts)
        )
        return str(row[0]) if row else None
