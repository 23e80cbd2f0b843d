"""Short-term memory: the session registry and bounded per-session transcripts.

The orchestrator keeps no durable state, so a conversation lives here: an (agent, session key)
pair maps to one session id for as long as the session is in use, and each session keeps its last
``max_entries`` transcript entries. A restarted orchestrator resolves the same key, gets the same
session back (``created`` is False) with its history, and carries on without greeting anew.
Sessions idle longer than the GC horizon are removed with their transcripts.
No MCP imports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.db import Database, Migration
from shared.protocol.memory.sessions import ROLES, Role, StoredEntry, TranscriptEntry

SESSION_MIGRATIONS: tuple[Migration, ...] = (
    Migration.sql(
        "memory_0002_sessions",
        """
        CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent TEXT NOT NULL,
            session_key TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_active_at REAL NOT NULL,
            UNIQUE (agent, session_key)
        );
        CREATE INDEX sessions_by_activity ON sessions (last_active_at);
        CREATE TABLE transcript (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            turn_id TEXT,
            dedupe_key TEXT,
            at REAL NOT NULL
        );
        CREATE INDEX transcript_by_session ON transcript (session_id, id);
        CREATE UNIQUE INDEX transcript_dedupe ON transcript (session_id, dedupe_key)
            WHERE dedupe_key IS NOT NULL;
        CREATE TABLE assistant_turns (agent TEXT PRIMARY KEY, count INTEGER NOT NULL) WITHOUT ROWID;
        """,
    ),
)


class UnknownSession(LookupError):
    """No session with this id belongs to this agent (never created, or removed by GC)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    session_id: int
    created: bool
    previous_active_at: float | None
    entries: int


@dataclass(frozen=True, slots=True)
class Appended:
    appended: int
    duplicates: int
    trimmed: int
    assistant_turns_before: int
    """The agent's assistant-turn count before this append (consolidation runs every N of them)."""
    assistant_turns_after: int


class SessionStore:
    def __init__(self, db: Database, *, max_entries: int, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.max_entries = max_entries
        self._clock = clock

    async def resolve(self, agent: str, session_key: str) -> Resolved:
        """The session for (agent, key), created on first use; marks it active now."""
        now = self._clock()
        async with self.db.transaction() as tx:
            row = await tx.fetchone(
                "SELECT id, last_active_at FROM sessions WHERE agent = ? AND session_key = ?",
                (agent, session_key),
            )
            if row is None:
                session_id = await tx.insert(
                    "INSERT INTO sessions (agent, session_key, created_at, last_active_at) "
                    "VALUES (?, ?, ?, ?)",
                    (agent, session_key, now, now),
                )
                return Resolved(session_id, created=True, previous_active_at=None, entries=0)
            session_id = int(row[0])
            await tx.execute("UPDATE sessions SET last_active_at = ? WHERE id = ?", (now, session_id))
            count = await tx.fetchone("SELECT count(*) FROM transcript WHERE session_id = ?", (session_id,))
        return Resolved(
            session_id, created=False, previous_active_at=float(row[1]), entries=int(count[0]) if count else 0
        )

    async def append(self, agent: str, session_id: int, entries: Sequence[TranscriptEntry]) -> Appended:
        """Append entries (oldest first), trim to the cap and count the agent's assistant turns."""
        now = self._clock()
        appended = duplicates = turns = 0
        async with self.db.transaction() as tx:
            owner = await tx.fetchone("SELECT agent FROM sessions WHERE id = ?", (session_id,))
            if owner is None or owner[0] != agent:
                raise UnknownSession(session_id)
            for entry in entries:
                inserted = await tx.execute(
                    "INSERT INTO transcript (session_id, role, content, turn_id, dedupe_key, at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (session_id, entry.role, entry.content, entry.turn_id, entry.dedupe_key, now),
                )
                if not inserted:
                    duplicates += 1
                    continue
                appended += 1
                # Only new entries count: a retried append must not bring consolidation forward.
                turns += entry.role == "assistant"
            trimmed = await tx.execute(
                "DELETE FROM transcript WHERE session_id = ? AND id <= ("
                "SELECT id FROM transcript WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (session_id, session_id, self.max_entries),
            )
            await tx.execute("UPDATE sessions SET last_active_at = ? WHERE id = ?", (now, session_id))
            before_row = await tx.fetchone("SELECT count FROM assistant_turns WHERE agent = ?", (agent,))
            before = int(before_row[0]) if before_row else 0
            if turns:
                await tx.execute(
                    "INSERT INTO assistant_turns (agent, count) VALUES (?, ?) "
                    "ON CONFLICT (agent) DO UPDATE SET count = count + excluded.count",
                    (agent, turns),
                )
        return Appended(appended, duplicates, trimmed, before, before + turns)

    async def history(self, agent: str, session_id: int, limit: int) -> list[StoredEntry]:
        """The session's last ``limit`` entries, oldest first."""
        owner = await self.db.fetchone("SELECT agent FROM sessions WHERE id = ?", (session_id,))
        if owner is None or owner[0] != agent:
            raise UnknownSession(session_id)
        rows = await self.db.fetchall(
            "SELECT id, role, content, turn_id, at FROM ("
            "SELECT id, role, content, turn_id, at FROM transcript WHERE session_id = ? "
            "ORDER BY id DESC LIMIT ?) ORDER BY id",
            (session_id, limit),
        )
        return [
            StoredEntry(id=int(r[0]), role=_role(r[1]), content=str(r[2]), turn_id=r[3], at=float(r[4]))
            for r in rows
        ]

    async def gc(self, idle_s: float) -> int:
        """Remove sessions idle for longer than ``idle_s`` (their transcripts go with them)."""
        return await self.db.execute(
            "DELETE FROM sessions WHERE last_active_at < ?", (self._clock() - idle_s,)
        )

    async def totals(self) -> tuple[int, int]:
        """(sessions, transcript entries) over every agent."""
        sessions = await self.db.fetchone("SELECT count(*) FROM sessions")
        entries = await self.db.fetchone("SELECT count(*) FROM transcript")
        return (int(sessions[0]) if sessions else 0, int(entries[0]) if entries else 0)


def _role(value: object) -> Role:
    for role in ROLES:
        if role == value:
            return role
    raise ValueError(f"the transcript holds an unknown role {value!r}")
