"""SQLite for every server: one file per server, one writer connection, WAL, named migrations.

Every statement of a `Database` runs on one aiosqlite connection, one at a time: on its worker
thread, or, for a file opened with ``inline=True``, on the event loop's thread whenever that worker
thread is idle (no hand-over: see `_statements`). An `anyio.Lock` serialises whole transactions: two
tasks never interleave statements of two transactions, and a statement outside `transaction()` waits
for the open one to finish instead of seeing its uncommitted rows.

When sqlite-vec is asked for, the connection may come from `sqlean` or `pysqlite3` instead of the
standard library (some Python builds cannot load extensions). Their exception classes are unrelated to
`sqlite3`'s, so errors are re-raised as the standard library class of the same name: callers catch
`sqlite3.IntegrityError` whichever driver is underneath.

A write refused because the disk is full raises `StorageFull` (naming the file) and marks
`Database.storage` until a later write succeeds; see `_storage`.
"""

from shared.db._connect import Synchronous
from shared.db._database import Database, Transaction
from shared.db._drivers import VEC_DRIVERS, sqlite_driver_for_vec
from shared.db._errors import DatabaseError
from shared.db._migrations import Migration, split_statements
from shared.db._reader import Reader, Reads
from shared.db._statements import Params
from shared.db._storage import (
    RECOVERED_FREE_BYTES,
    StorageCondition,
    StorageFull,
    StorageReport,
    collect_refusals,
    disk_is_full,
    is_storage_full,
)

__all__ = [
    "RECOVERED_FREE_BYTES",
    "VEC_DRIVERS",
    "Database",
    "DatabaseError",
    "Migration",
    "Params",
    "Reader",
    "Reads",
    "StorageCondition",
    "StorageFull",
    "StorageReport",
    "Synchronous",
    "Transaction",
    "collect_refusals",
    "disk_is_full",
    "is_storage_full",
    "split_statements",
    "sqlite_driver_for_vec",
]
