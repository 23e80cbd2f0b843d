"""Access bookkeeping of recalled memories, kept in memory and written in batches.

A recall used to write each recalled memory's access count and time at once: one transaction, so
one fsync, per recall. A recall now only notes them here, and :meth:`AccessLog.flush` writes every
noted access in one transaction: the memory server flushes every ``access_flush_s`` seconds and
when it stops, and the store flushes before anything that reads those columns (consolidation's
scoring, listing and exporting). A crash loses at most the accesses of the last interval, which
makes those memories look a little colder to the next consolidation pass and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.db import Database, StorageFull

_FLUSH = (
    "UPDATE memories SET last_accessed_at = max(last_accessed_at, ?), "
    "access_count = access_count + ?, archived = 0 WHERE id = ?"
)


@dataclass(slots=True)
class _Pending:
    last: float
    count: int


class AccessLog:
    """Accesses noted since the last flush, per memory id."""

    __slots__ = ("_clock", "_db", "_pending")

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock
        self._pending: dict[int, _Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, memory_ids: Sequence[int]) -> None:
        """These memories were recalled now (no I/O)."""
        now = self._clock()
        for memory_id in memory_ids:
            pending = self._pending.get(memory_id)
            if pending is None:
                self._pending[memory_id] = _Pending(now, 1)
            else:
                pending.last, pending.count = max(pending.last, now), pending.count + 1

    async def flush(self) -> int:
        """Write every noted access in one transaction; returns how many memories it updated.

        While the disk is full the accesses stay noted and the next flush tries again. A memory
        forgotten meanwhile is simply not updated.
        """
        if not self._pending:
            return 0
        taken, self._pending = self._pending, {}
        try:
            await self._db.executemany(
                _FLUSH, [(pending.last, pending.count, memory_id) for memory_id, pending in taken.items()]
            )
        except BaseException as exc:
            self._restore(taken)
            if isinstance(exc, StorageFull):
                return 0
            raise
        return len(taken)

    def _restore(self, taken: dict[int, _Pending]) -> None:
        for memory_id, pending in taken.items():
            newer = self._pending.get(memory_id)
            if newer is not None:
                pending.last, pending.count = max(pending.last, newer.last), pending.count + newer.count
            self._pending[memory_id] = pending
