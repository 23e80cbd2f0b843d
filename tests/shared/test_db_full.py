"""A full disk refuses the write with StorageFull naming the file, keeps what was stored, and recovers."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from shared.db import Database, Migration, StorageFull, is_storage_full
from tests.full_disk import FullDisk

pytestmark = pytest.mark.anyio

NOTES = Migration.sql("0001_notes", "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL);")
ROW = "x" * 3000
ATTEMPTS = 200


async def insert_until_refused(db: Database) -> tuple[int, StorageFull]:
    for stored in range(ATTEMPTS):
        try:
            async with db.transaction() as tx:
                await tx.insert("INSERT INTO notes(body) VALUES (?)", (ROW,))
        except StorageFull as exc:
            return stored, exc
    raise AssertionError(f"{ATTEMPTS} inserts on a full disk all succeeded")


async def test_a_write_on_a_full_tmpfs_is_refused_by_name_and_writes_resume_once_space_is_freed(
    full_disk: FullDisk,
) -> None:
    path = full_disk.root / "server.sqlite3"
    async with Database.open(path, [NOTES]) as db:
        await db.insert("INSERT INTO notes(body) VALUES (?)", ("before",))
        full_disk.fill()
        stored, refused = await insert_until_refused(db)
        assert str(refused) == (
            f"not stored: the disk holding {path} is full. Fix: free space on that filesystem (`df -h` "
            "shows it); nothing stored before was lost, and writes resume by themselves"
        )
        assert refused.path == path
        report = db.storage.report()
        assert (report.full, report.path, report.free_bytes) == (True, str(path), 0)
        assert report.since is not None
        assert await db.fetchall("SELECT count(*) FROM notes") == [(1 + stored,)]

        full_disk.free()
        await db.insert("INSERT INTO notes(body) VALUES (?)", ("after",))
        assert db.storage.report().full is False
        assert db.storage.report().since is None
        assert await db.fetchall("SELECT count(*) FROM notes") == [(2 + stored,)]


async def test_sqlite_full_from_a_page_limit_is_the_same_refusal_and_rolls_the_transaction_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "server.sqlite3"
    async with Database.open(path, [NOTES]) as db:
        await db.fetchall("PRAGMA max_page_count = 3")
        rows = [("kept out",), *[(ROW,)] * 20]
        with pytest.raises(StorageFull, match=rf"not stored: the disk holding {path} is full") as caught:
            await db.executemany("INSERT INTO notes(body) VALUES (?)", rows)
        assert isinstance(caught.value, sqlite3.OperationalError)
        assert db.storage.full
        assert await db.fetchall("SELECT count(*) FROM notes") == [(0,)]


def test_full_disk_errors_are_recognised_from_sqlite_and_from_the_operating_system() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = 5
    assert [
        is_storage_full(full),
        is_storage_full(busy),
        is_storage_full(OSError(errno.ENOSPC, "No space left on device")),
        is_storage_full(OSError(errno.EDQUOT, "Disk quota exceeded")),
        is_storage_full(OSError(errno.EACCES, "Permission denied")),
    ] == [True, False, True, True, False]
