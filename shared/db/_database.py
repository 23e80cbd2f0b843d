"""The Database handle: the writer connection, its statements and transactions, the read-only reader."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from shared.db._connect import Connector, Synchronous, check_options
from shared.db._errors import problem
from shared.db._migrations import Migration
from shared.db._reader import ReadConnector, Reader
from shared.db._statements import Inline, Params, Statements
from shared.db._storage import StorageCondition


class Transaction:
    """Statements of one `BEGIN IMMEDIATE ... COMMIT`; usable only inside its `async with` block.

    ``BEGIN IMMEDIATE`` goes with the transaction's first statement, in the same hand-over to the
    connection's thread; a transaction that runs no statement begins and commits nothing."""

    __slots__ = ("_open", "_path", "_statements", "begun")

    def __init__(self, statements: Statements, path: Path) -> None:
        self._statements = statements
        self._path = path
        self._open = True
        self.begun = False

    @property
    def is_open(self) -> bool:
        return self._open

    def _close(self) -> None:
        self._open = False

    def _begin(self) -> bool:
        """True for the statement that opens the transaction (the first one)."""
        if not self._open:
            raise problem(
                self._path,
                "the transaction is already finished",
                "use the Transaction only inside its `async with db.transaction()` block",
            )
        first, self.begun = not self.begun, True
        return first

    async def execute(self, sql: str, params: Params = ()) -> int:
        return await self._statements.execute(sql, params, begin=self._begin())

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return await self._statements.fetchall(sql, params, begin=self._begin())

    async def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        return await self._statements.fetchone(sql, params, begin=self._begin())

    async def insert(self, sql: str, params: Params = ()) -> int:
        return await self._statements.insert(sql, params, begin=self._begin())

    async def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        await self._statements.executemany(sql, list(seq), begin=self._begin())


class Database:
    """One server's SQLite file. Obtain it with `async with Database.open(path, migrations) as db`."""

    __slots__ = (
        "_busy_timeout_ms",
        "_current",
        "_lock",
        "_statements",
        "driver",
        "path",
        "synchronous",
        "vec_version",
    )

    def __init__(
        self,
        *,
        path: Path,
        driver: str,
        statements: Statements,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "FULL",
    ) -> None:
        self.path = path
        self.driver = driver
        self._busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self.vec_version: str | None = None
        self._statements = statements
        self._lock = anyio.Lock()
        # Per task context, so statements issued inside `transaction()` (also from child tasks
        # started there) join it instead of waiting for the lock it holds.
        self._current: ContextVar[Transaction | None] = ContextVar(f"transaction:{path}", default=None)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path | str,
        migrations: Sequence[Migration] = (),
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 5000,
        load_vec: bool = False,
        inline: bool = False,
    ) -> AsyncIterator[Database]:
        """Open (creating if needed) the database, set its pragmas and apply pending migrations.

        ``inline``: run each statement on the event loop's thread while the connection's worker
        thread is idle, without a hand-over (``shared.db._statements``): for a file of small keyed
        statements that this process alone writes."""
        db_path = Path(path)
        check_options(db_path, migrations, synchronous, busy_timeout_ms)
        connector = Connector(db_path, tuple(migrations), synchronous, busy_timeout_ms, load_vec, inline)
        conn = await _opened(aiosqlite.Connection(connector, iter_chunk_size=64))
        try:
            if connector.failure is not None:
                raise connector.failure
            statements = Statements(
                conn,
                connector.error_class,
                StorageCondition(db_path),
                inline=Inline(busy_timeout_ms) if inline else None,
            )
            db = cls(
                path=db_path,
                driver=connector.driver,
                statements=statements,
                busy_timeout_ms=busy_timeout_ms,
                synchronous=synchronous,
            )
            if load_vec:
                row = await db.fetchone("SELECT vec_version()")
                db.vec_version = None if row is None else str(row[0])
            yield db
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[Reader]:
        """A read-only connection of its own to this file, whose reads overlap this one's (`_reader`)."""
        connector = ReadConnector(self.path, self.driver, self._busy_timeout_ms)
        conn = await _opened(aiosqlite.Connection(connector, iter_chunk_size=64))
        try:
            if connector.failure is not None:
                raise connector.failure
            yield Reader(self.path, Statements(conn, connector.error_class, StorageCondition(self.path)))
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    @property
    def storage(self) -> StorageCondition:
        """Whether writes to this file currently fail because its disk is full."""
        return self._statements.storage

    def _joined(self) -> Transaction | None:
        """The transaction this task (or the task that started it) is inside, if any: a statement
        issued there joins it instead of waiting for the lock it holds."""
        current = self._current.get()
        return current if current is not None and current.is_open else None

    async def execute(self, sql: str, params: Params = (), *, durable: bool = True) -> int:
        """Run one statement; returns the row count. Commits at once unless inside `transaction()`.

        ``durable=False`` commits without waiting for the disk (``synchronous=NORMAL`` for this one
        statement): the change survives the process being killed and reaches the disk with the next
        durable commit or checkpoint, but a power cut before then can undo it. Only for bookkeeping
        whose loss the owner's recovery already handles (an acknowledgement, a delivery count).
        Inside `transaction()` the transaction's own commit decides.
        """
        joined = self._joined()
        if joined is not None:
            return await joined.execute(sql, params)
        async with self._lock:
            if not durable and self.synchronous in ("FULL", "EXTRA"):
                count = await self._statements.execute_without_sync(sql, params, self.synchronous)
            else:
                count = await self._statements.execute(sql, params)
        self._statements.storage.stored()
        return count

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        joined = self._joined()
        if joined is not None:
            return await joined.fetchall(sql, params)
        async with self._lock:
            return await self._statements.fetchall(sql, params)

    async def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        joined = self._joined()
        if joined is not None:
            return await joined.fetchone(sql, params)
        async with self._lock:
            return await self._statements.fetchone(sql, params)

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run an INSERT; returns `last_insert_rowid()` (unchanged when nothing was inserted)."""
        joined = self._joined()
        if joined is not None:
            return await joined.insert(sql, params)
        async with self._lock:
            rowid = await self._statements.insert(sql, params)
        self._statements.storage.stored()
        return rowid

    async def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        """Run one statement per parameter row, all in one transaction (one fsync, all or nothing)."""
        joined = self._joined()
        if joined is not None:
            await joined.executemany(sql, seq)
            return
        async with self.transaction() as transaction:
            await transaction.executemany(sql, seq)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` when the block raises or is cancelled."""
        if self._joined() is not None:
            raise problem(
                self.path,
                "transaction() was entered while this task is already inside one",
                "run the statements on the Transaction you already have (transactions do not nest)",
            )
        async with self._lock:
            transaction = Transaction(self._statements, self.path)
            token = self._current.set(transaction)
            try:
                try:
                    yield transaction
                    if transaction.begun:
                        await self._statements.execute("COMMIT", ())
                        self._statements.storage.stored()
                except BaseException:
                    # Statements run in queue order, so this ROLLBACK follows any statement a
                    # cancelled await left queued.
                    if transaction.begun:
                        with anyio.CancelScope(shield=True):
                            await self._statements.rollback_quietly()
                    raise
            finally:
                transaction._close()
                self._current.reset(token)


async def _opened(conn: aiosqlite.Connection) -> aiosqlite.Connection:
    """``conn`` once its thread has opened (and migrated) the file, even when cancelled meanwhile.

    Given up halfway, the thread would go on opening after the caller returned, and a process that
    was stopping (a server whose input closed while it started) could close its event loop first:
    the thread then fails handing the connection over ("Event loop is closed") and prints a
    traceback. Waiting for it costs the open's own time (milliseconds; at most the busy timeout when
    another process holds the file), and the caller's ``finally`` then closes the connection.
    """
    with anyio.CancelScope(shield=True):
        await conn
    return conn
