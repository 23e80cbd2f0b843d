"""The ledger: chained appends, reads, full-text search and verification. No MCP imports.

Every write runs in one ``BEGIN IMMEDIATE`` transaction that first reads the head, so appends, goal
changes and retention, which all add entries, extend one chain in commit order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio

from servers.audit.chain import GENESIS, RemovedRange, Row, canonical_entry, entry_hash, verify_rows
from servers.audit.drafts import checked_draft
from servers.audit.errors import InvalidRequest
from servers.audit.schema import MIGRATIONS
from shared.db import Database, Transaction
from shared.protocol.audit.bodies import Body, TurnBody
from shared.protocol.audit.digest import canonical_json
from shared.protocol.audit.entries import Appended, Entry, EntryDraft, Head, VerifyReport

Clock = Callable[[], datetime]
Checked = tuple[EntryDraft, Body]
T = TypeVar("T")
"""A draft with the body its kind's model validated."""

COLUMNS = "seq, at, kind, source, agent, goal_id, subject, body, prev_hash, hash"
INSERT = (
    "INSERT INTO ledger(seq, at, kind, source, agent, goal_id, subject, body, turn_index, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """Fixed width (microseconds, +00:00), so stored times compare correctly as text."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def to_entry(row: Sequence[Any]) -> Entry:
    seq, at, kind, source, agent, goal_id, subject, body, prev_hash, hash_ = row
    return Entry(
        seq=seq,
        at=at,
        kind=kind,
        source=source,
        agent=agent,
        goal_id=goal_id,
        subject=subject,
        body=json.loads(body),
        prev_hash=prev_hash,
        hash=hash_,
    )


def fts_query(text: str) -> str:
    """Each whitespace-separated term as a quoted FTS5 phrase (all must match): the model's text is
    never parsed as FTS5 syntax, so quotes, ``-`` or ``:`` in it cannot make the query fail."""
    terms = text.split()
    if not terms:
        raise InvalidRequest(f"query {text!r} is empty: pass words to look for, e.g. 'memory_search denied'")
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms)


@asynccontextmanager
async def open_database(path: Path) -> AsyncIterator[Database]:
    """The audit file with ``synchronous=FULL``: an acknowledged entry survives a power cut."""
    async with Database.open(path, MIGRATIONS, synchronous="FULL", inline=True) as db:
        yield db


class ChainWriter:
    """Adds entries inside one open transaction, each linked to the one before."""

    def __init__(self, tx: Transaction, head: Head, now: Callable[[], str]) -> None:
        self.tx = tx
        self.head = head
        self._now = now

    async def _recorded_turn(self, goal_id: str | None, index: int) -> Appended | None:
        row = await self.tx.fetchone(
            "SELECT seq, hash, at FROM ledger WHERE kind = 'turn' AND goal_id = ? AND turn_index = ?",
            (goal_id, index),
        )
        return None if row is None else Appended(seq=row[0], hash=row[1], at=row[2], created=False)

    async def add(self, items: Sequence[Checked]) -> list[Appended]:
        """Chain and insert ``items`` in order; a turn already recorded returns its existing entry."""
        results: list[Appended] = []
        rows: list[tuple[Any, ...]] = []
        turns: dict[tuple[str | None, int], Appended] = {}
        for draft, body in items:
            turn_index = body.index if isinstance(body, TurnBody) else None
            if turn_index is not None:
                key = (draft.goal_id, turn_index)
                earlier = turns.get(key) or await self._recorded_turn(*key)
                if earlier is not None:
                    results.append(earlier)
                    continue
            seq, at, data = self.head.seq + 1, self._now(), body.model_dump(mode="json")
            canonical = canonical_entry(
                seq, at, draft.kind, draft.source, draft.agent, draft.goal_id, draft.subject, data
            )
            hash_ = entry_hash(self.head.hash, canonical)
            text = canonical_json(data)
            rows.append(
                (
                    seq,
                    at,
                    draft.kind,
                    draft.source,
                    draft.agent,
                    draft.goal_id,
                    draft.subject,
                    text,
                    turn_index,
                    self.head.hash,
                    hash_,
                )
            )
            self.head = Head(seq=seq, hash=hash_)
            appended = Appended(seq=seq, hash=hash_, at=at, created=True)
            if turn_index is not None:
                turns[(draft.goal_id, turn_index)] = appended.model_copy(update={"created": False})
            results.append(appended)
        if rows:
            await self.tx.executemany(INSERT, rows)
        return results


class Writes(Protocol):
    """Runs a piece of work inside a write transaction positioned at the ledger's head."""

    async def __call__(self, work: Callable[[ChainWriter], Awaitable[T]]) -> T: ...


class Ledger:
    def __init__(self, db: Database, *, clock: Clock = utc_now) -> None:
        self.db = db
        self.clock = clock

    def now(self) -> str:
        return iso(self.clock())

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[ChainWriter]:
        """A write transaction positioned at the current head."""
        async with self.db.transaction() as tx:
            row = await tx.fetchone("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")
            head = Head(seq=0, hash=GENESIS) if row is None else Head(seq=row[0], hash=row[1])
            yield ChainWriter(tx, head, self.now)

    async def write_alone(self, work: Callable[[ChainWriter], Awaitable[T]]) -> T:
        """Run ``work`` in a write transaction of its own (the group-commit writer batches instead)."""
        async with self.writing() as writer:
            return await work(writer)

    async def append(self, drafts: Sequence[EntryDraft]) -> list[Appended]:
        """Validate and append in one transaction of its own (the group-commit writer batches instead)."""
        checked = [checked_draft(draft) for draft in drafts]
        async with self.writing() as writer:
            return await writer.add(checked)

    async def head(self) -> Head:
        row = await self.db.fetchone("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")
        return Head(seq=0, hash=GENESIS) if row is None else Head(seq=row[0], hash=row[1])

    async def tail(
        self,
        *,
        goal_id: str | None = None,
        source: str | None = None,
        kind: str | None = None,
        kinds: Sequence[str] | None = None,
        since_seq: int | None = None,
        since_at: datetime | None = None,
        limit: int = 50,
    ) -> list[Entry]:
        """Matching entries, oldest first: after ``since_seq`` and from ``since_at`` if either is
        given, else the newest ``limit``."""
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("goal_id", goal_id), ("source", source), ("kind", kind)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if kinds:
            where.append(f"kind IN ({', '.join('?' * len(kinds))})")
            params.extend(kinds)
        if since_seq is not None:
            where.append("seq > ?")
            params.append(since_seq)
        if since_at is not None:
            where.append("at >= ?")
            params.append(iso(since_at))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        forward = since_seq is not None or since_at is not None
        rows = await self.db.fetchall(
            f"SELECT {COLUMNS} FROM ledger {clause} ORDER BY seq {'ASC' if forward else 'DESC'} LIMIT ?",
            [*params, limit],
        )
        entries = [to_entry(row) for row in rows]
        return entries if forward else entries[::-1]

    async def search(
        self,
        query: str,
        *,
        kind: str | None = None,
        source: str | None = None,
        goal_id: str | None = None,
        limit: int = 20,
    ) -> list[Entry]:
        """Entries whose subject or body contains every term of ``query``, newest first."""
        where = ["ledger_fts MATCH ?"]
        params: list[Any] = [fts_query(query)]
        for column, value in (("kind", kind), ("source", source), ("goal_id", goal_id)):
            if value is not None:
                where.append(f"l.{column} = ?")
                params.append(value)
        columns = ", ".join(f"l.{name.strip()}" for name in COLUMNS.split(","))
        rows = await self.db.fetchall(
            f"SELECT {columns} FROM ledger_fts JOIN ledger AS l ON l.seq = ledger_fts.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY l.seq DESC LIMIT ?",
            [*params, limit],
        )
        return [to_entry(row) for row in rows]

    async def knows_goal(self, goal_id: str) -> bool:
        row = await self.db.fetchone(
            "SELECT EXISTS(SELECT 1 FROM goals WHERE id = ?) "
            "OR EXISTS(SELECT 1 FROM ledger WHERE goal_id = ?)",
            (goal_id, goal_id),
        )
        return bool(row and row[0])

    async def verify(self, expected_head: Head | None = None) -> VerifyReport:
        """Walk the whole chain on a separate read connection, off the event loop."""
        return await anyio.to_thread.run_sync(verify_file, self.db.path, expected_head)


def verify_file(path: Path, expected_head: Head | None = None) -> VerifyReport:
    """Verify the ledger in ``path`` from one read snapshot (appends may go on meanwhile)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("BEGIN")
        ranges = [
            RemovedRange(*row)
            for row in conn.execute("SELECT first_seq, last_seq, prev_hash, last_hash FROM removed_ranges")
        ]
        latest = conn.execute(
            "SELECT seq, body FROM ledger WHERE kind = 'checkpoint' ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        last = conn.execute("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1").fetchone()
        head = Head(seq=0, hash=GENESIS) if last is None else Head(seq=last[0], hash=last[1])
        rows = (Row(*row) for row in conn.execute(f"SELECT {COLUMNS} FROM ledger ORDER BY seq"))
        return verify_rows(rows, ranges, head=head, latest_checkpoint=latest, expected_head=expected_head)
    finally:
        conn.close()
