"""Recognising a full disk, and the storage condition of one database file.

A full filesystem is not a bug in the server that hit it: the write is refused with `StorageFull`
(naming the file and the fix), the server keeps running, and its `StorageCondition` says so until
a later write succeeds. Nothing already committed is lost: SQLite rolls the failed transaction back.
"""

from __future__ import annotations

import errno
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from shared.db._errors import DatabaseError

logger = logging.getLogger("nexo.storage")

SQLITE_FULL = 13
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
RECOVERED_FREE_BYTES = 1 << 20
"""Free space at which a full disk counts as having room again (1 MiB)."""


_refusals: ContextVar[list[StorageFull] | None] = ContextVar("storage_refusals", default=None)


@contextmanager
def collect_refusals() -> Iterator[list[StorageFull]]:
    """The full-disk refusals raised in this task (and the tasks it starts) while the block runs."""
    refusals: list[StorageFull] = []
    token = _refusals.set(refusals)
    try:
        yield refusals
    finally:
        _refusals.reset(token)


class StorageFull(DatabaseError, sqlite3.OperationalError):
    """A write was refused because the filesystem holding `path` is full (or over quota).

    Also an `sqlite3.OperationalError`, the class SQLite itself raises for it, so code that already
    treats a failed statement as an operational problem keeps doing so.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            f"not stored: the disk holding {path} is full. Fix: free space on that filesystem "
            "(`df -h` shows it); nothing stored before was lost, and writes resume by themselves"
        )


def is_storage_full(exc: BaseException) -> bool:
    """True for SQLITE_FULL (any extended code) and for ENOSPC / EDQUOT from the operating system."""
    if isinstance(exc, StorageFull):
        return True
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF == SQLITE_FULL
        return "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def free_bytes(path: Path) -> int | None:
    """Bytes free for this user on the filesystem holding `path` (None when it cannot be asked)."""
    probe = path if path.exists() else path.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def disk_is_full(path: Path) -> bool:
    """Whether the filesystem holding `path` has less than `RECOVERED_FREE_BYTES` free.

    For failures that carry no errno, such as a subprocess (git) that could not write.
    """
    free = free_bytes(path)
    return free is not None and free < RECOVERED_FREE_BYTES


@dataclass(frozen=True, slots=True)
class StorageReport:
    """What a server says about one file it writes: whether the last write found the disk full."""

    path: str
    full: bool
    since: str | None
    """When the disk was first found full (ISO 8601, UTC); None while writes succeed."""
    free_bytes: int | None

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "full": self.full, "since": self.since, "free_bytes": self.free_bytes}


class StorageCondition:
    """Whether writes to `path` currently fail for lack of space; logged once per change, not per write."""

    __slots__ = ("_since", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._since: datetime | None = None

    @property
    def full(self) -> bool:
        return self._since is not None

    def refused(self, cause: BaseException) -> StorageFull:
        """Record a write refused for lack of space; returns the error to raise."""
        if self._since is None:
            self._since = datetime.now(UTC)
            logger.error(
                "the disk holding %s is full: writes are refused until space is freed (%s)", self.path, cause
            )
        refusal = StorageFull(self.path)
        collected = _refusals.get()
        if collected is not None:
            collected.append(refusal)
        return refusal

    def stored(self) -> None:
        """A write succeeded: the condition (if any) has ended, once the disk has room again.

        A filesystem filled to the last byte still takes a write that fits in pages SQLite already
        holds, so one success alone does not end the condition.
        """
        if self._since is not None:
            free = free_bytes(self.path)
            if free is not None and free < RECOVERED_FREE_BYTES:
                return
            self._recovered()

    def report(self) -> StorageReport:
        """The condition now; a disk that has room again ends it even before the next write."""
        free = free_bytes(self.path)
        if self._since is not None and free is not None and free >= RECOVERED_FREE_BYTES:
            self._recovered()
        since = None if self._since is None else self._since.isoformat(timespec="seconds")
        return StorageReport(str(self.path), self.full, since, free)

    def _recovered(self) -> None:
        self._since = None
        logger.warning("the disk holding %s has space again: writes are accepted", self.path)
