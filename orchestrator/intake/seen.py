"""Pushed messages answered once, also across restarts.

A Claude Code channel keeps no event log: its push is the message's only copy and carries nothing to
acknowledge, and the same message can be pushed again (the platform redelivers an update, the plugin
restarts). A message is known by its (server, chat, message id): a platform's message id is unique
only inside one chat. The keys seen within the window are kept in a small SQLite file in the
orchestrator's state directory, so a daemon restart does not answer them again. A key is kept from the
moment its message is taken: a message taken and then lost to a crash is not answered on a repeat
either, which is the side a chat tolerates (one missing answer, never two).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from orchestrator.intake.recent import MAX_KEYS, WINDOW_S, RecentKeys
from shared.db import Database, Migration
from shared.private import make_private_dirs

PushKey = tuple[str, str, str, str]
"""(agent, server, chat id, message id): each agent bound to a channel answers its messages once."""
PRUNE_EVERY = 100
"""Writes between two sweeps of keys past the window or over the limit."""

MIGRATIONS = (
    Migration.sql(
        "0001_pushes",
        """
        CREATE TABLE pushes (
            agent TEXT NOT NULL,
            server TEXT NOT NULL,
            chat TEXT NOT NULL,
            message_id TEXT NOT NULL,
            seen_at REAL NOT NULL,
            PRIMARY KEY (agent, server, chat, message_id)
        ) WITHOUT ROWID;
        CREATE INDEX pushes_seen_at ON pushes(seen_at);
        """,
    ),
)


def seen_path(state_dir: Path) -> Path:
    return state_dir / "orchestrator" / "pushes.sqlite"


class SeenPushes:
    """Keys of pushed messages seen within ``window_s``, about ``limit`` of them at most (the oldest
    are forgotten first, in sweeps every PRUNE_EVERY writes); in memory only when no database is given
    (an intake run inside a test or a one-shot)."""

    def __init__(
        self,
        db: Database | None = None,
        *,
        window_s: float = WINDOW_S,
        limit: int = MAX_KEYS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._memory = RecentKeys(window_s, limit, clock=clock)
        self._window_s = window_s
        self._limit = limit
        self._clock = clock
        self._writes = 0

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path,
        *,
        window_s: float = WINDOW_S,
        limit: int = MAX_KEYS,
        clock: Callable[[], float] = time.time,
    ) -> AsyncIterator[SeenPushes]:
        make_private_dirs(path.parent)
        async with Database.open(path, MIGRATIONS, inline=True) as db:
            yield cls(db, window_s=window_s, limit=limit, clock=clock)

    async def repeat(self, key: PushKey) -> bool:
        """True when ``key`` was seen within the window; otherwise remember it and return False."""
        if self._db is None:
            return self._memory.repeat(key)
        now = self._clock()
        async with self._db.transaction() as tx:
            row = await tx.fetchone(
                "SELECT seen_at FROM pushes WHERE agent = ? AND server = ? AND chat = ? AND message_id = ?",
                key,
            )
            if row is not None and now - float(row[0]) < self._window_s:
                return True
            await tx.execute(
                "INSERT OR REPLACE INTO pushes(agent, server, chat, message_id, seen_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (*key, now),
            )
            if self._writes % PRUNE_EVERY == 0:
                await tx.execute("DELETE FROM pushes WHERE seen_at <= ?", (now - self._window_s,))
                await tx.execute(
                    "DELETE FROM pushes WHERE (agent, server, chat, message_id) NOT IN (SELECT agent, "
                    "server, chat, message_id FROM pushes ORDER BY seen_at DESC LIMIT ?)",
                    (self._limit,),
                )
            self._writes += 1
        return False

    async def count(self) -> int:
        if self._db is None:
            return len(self._memory)
        row = await self._db.fetchone("SELECT COUNT(*) FROM pushes")
        return int(row[0]) if row is not None else 0
