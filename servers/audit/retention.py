"""Retention: trim old entries without breaking verification. No MCP imports.

A trim removes, per goal, the turn-scoped entries (turns, tool calls, approvals) older than the
goal's newest ``turns_per_goal`` turns, and, when a maximum age is set, every entry older than it.
In the same transaction it records every removed seq range (with the hash that linked into it and
its last hash) in ``removed_ranges`` and appends a chained ``checkpoint`` entry holding a digest of
that whole table. Verification crosses a gap only through a recorded range, and trusts the table
only if the newest checkpoint's digest matches it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import anyio

from servers.audit.chain import RemovedRange, merge, ranges_digest, runs
from servers.audit.drafts import CheckpointBody, internal_draft
from servers.audit.store import Ledger, iso
from shared.db import Transaction
from shared.protocol.audit.entries import Entry

logger = logging.getLogger("nexo.audit.retention")

TURN_SCOPED = ("turn", "tool_call", "approval_requested", "approval_answered")
CHUNK = 500
"""Seqs per ``IN (...)`` list, well under SQLite's bound-parameter limit."""


@dataclass(frozen=True, slots=True)
class TrimOutcome:
    removed: int
    checkpoint: Entry | None


async def _over_cap(tx: Transaction, turns_per_goal: int) -> set[int]:
    doomed: set[int] = set()
    goals = await tx.fetchall(
        "SELECT goal_id FROM ledger WHERE kind = 'turn' GROUP BY goal_id HAVING count(*) > ?",
        (turns_per_goal,),
    )
    for (goal_id,) in goals:
        oldest_kept = await tx.fetchone(
            "SELECT seq FROM ledger WHERE kind = 'turn' AND goal_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (goal_id, turns_per_goal - 1),
        )
        assert oldest_kept is not None
        marks = ", ".join("?" * len(TURN_SCOPED))
        rows = await tx.fetchall(
            f"SELECT seq FROM ledger WHERE goal_id = ? AND kind IN ({marks}) AND seq < ?",
            (goal_id, *TURN_SCOPED, oldest_kept[0]),
        )
        doomed.update(seq for (seq,) in rows)
    return doomed


async def _removed_rows(tx: Transaction, seqs: list[int]) -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    for start in range(0, len(seqs), CHUNK):
        chunk = seqs[start : start + CHUNK]
        rows = await tx.fetchall(
            f"SELECT seq, prev_hash, hash FROM ledger WHERE seq IN ({', '.join('?' * len(chunk))})", chunk
        )
        found.extend((int(seq), str(prev), str(hash_)) for seq, prev, hash_ in rows)
    return found


async def trim(ledger: Ledger, *, turns_per_goal: int, max_age_s: float | None) -> TrimOutcome:
    """Remove what retention allows, record it, and return the checkpoint (None if nothing went)."""
    async with ledger.writing() as writer:
        tx = writer.tx
        doomed = await _over_cap(tx, turns_per_goal)
        if max_age_s is not None:
            cutoff = iso(ledger.clock() - timedelta(seconds=max_age_s))
            doomed.update(
                seq for (seq,) in await tx.fetchall("SELECT seq FROM ledger WHERE at < ?", (cutoff,))
            )
        if not doomed:
            return TrimOutcome(removed=0, checkpoint=None)
        seqs = sorted(doomed)
        removed = await _removed_rows(tx, seqs)
        existing = [
            RemovedRange(*row)
            for row in await tx.fetchall(
                "SELECT first_seq, last_seq, prev_hash, last_hash FROM removed_ranges"
            )
        ]
        ranges = merge([*existing, *runs(removed)])
        await tx.execute("INSERT INTO retention_running(id) VALUES (1)")
        await tx.executemany("DELETE FROM ledger WHERE seq = ?", [(seq,) for seq in seqs])
        await tx.execute("DELETE FROM retention_running")
        await tx.execute("DELETE FROM removed_ranges")
        await tx.executemany(
            "INSERT INTO removed_ranges(first_seq, last_seq, prev_hash, last_hash) VALUES (?, ?, ?, ?)",
            [(r.first, r.last, r.prev_hash, r.last_hash) for r in ranges],
        )
        body = CheckpointBody(
            removed=len(seqs),
            first_seq=seqs[0],
            last_seq=seqs[-1],
            last_removed_hash=max(removed)[2],
            ranges=len(ranges),
            ranges_digest=ranges_digest(ranges),
            turns_per_goal=turns_per_goal,
            max_age_s=max_age_s,
        )
        subject = f"retention removed {len(seqs)} entries between {seqs[0]} and {seqs[-1]}"
        draft = internal_draft(body, source="audit", subject=subject)
        [appended] = await writer.add([(draft, body)])
    logger.info("%s (checkpoint %d)", subject, appended.seq)
    [checkpoint] = await ledger.tail(since_seq=appended.seq - 1, limit=1)
    return TrimOutcome(removed=len(seqs), checkpoint=checkpoint)


class Retention:
    """Runs :func:`trim` with the server's settings, on request and every ``interval_s``."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        turns_per_goal: int,
        max_age_s: float | None,
        interval_s: float,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.ledger = ledger
        self.turns_per_goal = turns_per_goal
        self.max_age_s = max_age_s
        self.interval_s = interval_s
        self._sleep = sleep

    async def trim(self, *, turns_per_goal: int | None = None, max_age_s: float | None = None) -> TrimOutcome:
        return await trim(
            self.ledger,
            turns_per_goal=turns_per_goal or self.turns_per_goal,
            max_age_s=max_age_s if max_age_s is not None else self.max_age_s,
        )

    async def run_periodically(self) -> None:
        """Trim at start, then every ``interval_s``; a failed pass is logged and retried next time."""
        while True:
            try:
                await self.trim()
            except Exception:  # a background pass must not take the server down
                logger.exception("retention pass failed; retrying in %.0fs", self.interval_s)
            await self._sleep(self.interval_s)
