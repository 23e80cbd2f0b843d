"""What the email channel keeps beside the kit's tables: the IMAP cursor and each thread's reply headers."""

from __future__ import annotations

from dataclasses import dataclass

from shared.db import Database

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS email_cursor (folder TEXT PRIMARY KEY, uidvalidity INTEGER NOT NULL, "
    "last_uid INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS email_messages (message_id TEXT PRIMARY KEY, thread TEXT NOT NULL, "
    "sender TEXT NOT NULL, subject TEXT NOT NULL, refs TEXT NOT NULL, received_at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS email_messages_thread ON email_messages (thread, received_at)",
)


@dataclass(frozen=True, slots=True)
class Parent:
    """The mail a reply answers: its id, its thread's references, who to answer and the subject."""

    message_id: str
    sender: str
    subject: str
    references: tuple[str, ...]


class MailStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self) -> None:
        for statement in SCHEMA:
            await self.db.execute(statement)

    async def cursor(self, folder: str, uidvalidity: int) -> int:
        """The last UID handled in ``folder``; 0 when the folder is new or its UIDVALIDITY changed."""
        row = await self.db.fetchone(
            "SELECT last_uid FROM email_cursor WHERE folder = ? AND uidvalidity = ?", (folder, uidvalidity)
        )
        return int(row[0]) if row else 0

    async def advance(self, folder: str, uidvalidity: int, uid: int) -> None:
        await self.db.execute(
            "INSERT INTO email_cursor (folder, uidvalidity, last_uid) VALUES (?, ?, ?) "
            "ON CONFLICT (folder) DO UPDATE SET "
            "uidvalidity = excluded.uidvalidity, last_uid = excluded.last_uid",
            (folder, uidvalidity, uid),
        )

    async def remember(self, parent: Parent, thread: str, received_at: int) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO email_messages (message_id, thread, sender, subject, refs, received_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                parent.message_id,
                thread,
                parent.sender,
                parent.subject,
                " ".join(parent.references),
                received_at,
            ),
        )

    async def parent(self, thread: str, message_id: str | None) -> Parent | None:
        """The mail ``message_id`` of the thread, else the thread's latest mail."""
        row = None
        if message_id:
            row = await self.db.fetchone(
                "SELECT message_id, sender, subject, refs FROM email_messages "
                "WHERE message_id = ? AND thread = ?",
                (message_id, thread),
            )
        if row is None:
            row = await self.db.fetchone(
                "SELECT message_id, sender, subject, refs FROM email_messages WHERE thread = ? "
                "ORDER BY received_at DESC, rowid DESC LIMIT 1",
                (thread,),
            )
        if row is None:
            return None
        return Parent(str(row[0]), str(row[1]), str(row[2]), tuple(str(row[3]).split()))
