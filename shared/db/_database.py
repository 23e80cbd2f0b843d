"""The Database handle: the writer connection, its statements and transactions, the read-only reader."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeAlias

import aiosqlite
import anyio

from shared.db._connect import Connector, Synchronous, check_options
from shared.db._drivers import as_stdlib_error
from shared.db._errors import problem
from shared.db._migrations import Migration
from shared.db._reader import ReadConnector, Reader
from shared.db._storage import StorageCondition, StorageFull, is_storage_full

Params: TypeAlias = Sequence[Any] | Mapping[str, Any]


def _rowcount(conn: sqlite3.Connection, sql: str, params: Params) -> int:
    cursor = conn.execute(sql, params)
    try:
        return cursor.rowcount
    finally:
        cursor.close()


def _first_row(conn: sqlite3.Connection, sql: str, params: Params) -> Any:
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchone()
    finally:
        cursor.close()


def _each_row(conn: sqlite3.Connection, sql: str, rows: list[Sequence[Any]]) -> None:
    conn.executemany(sql, rows).close()


def _all_rows(conn: sqlite3.Connection, sql: str, params: Params) -> list[Any]:
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def _inserted(conn: sqlite3.Connection, sql: str, params: Params) -> Any:
    conn.execute(sql, params).close()
    return _first_row(conn, "SELECT last_insert_rowid()", ())


def _begun(conn: sqlite3.Connection, statement: Callable[..., Any], *args: Any) -> Any:
    """``BEGIN IMMEDIATE``, then the transaction's first statement: one hand-over for both."""
    conn.execute("BEGIN IMMEDIATE").close()
    return statement(conn, *args)


def _without_sync(conn: sqlite3.Connection, sql: str, params: Params, synchronous: str) -> int:
    """One statement committed with ``synchronous=NORMAL``, the file's own setting put back after."""
    conn.execute("PRAGMA synchronous = NORMAL").close()
    try:
        return _rowcount(conn, sql, params)
    finally:
        conn.execute(f"PRAGMA synchronous = {synchronous}").close()


class _Statements:
    """The statements every handle offers, all sent through the single aiosqlite connection."""

    __slots__ = ("_conn", "_foreign_error", "storage")

    def __init__(
        self,
        conn: aiosqlite.Connection,
        foreign_error: tuple[type[Exception], ...],
        storage: StorageCondition,
    ) -> None:
        self._conn = conn
        self._foreign_error = foreign_error
        self.storage = storage

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except self._foreign_error as exc:
            error = as_stdlib_error(exc)
            if is_storage_full(error):
                raise self.storage.refused(error) from exc
            raise error from exc
        except sqlite3.Error as exc:
            if is_storage_full(exc) and not isinstance(exc, StorageFull):
                raise self.storage.refused(exc) from exc
            raise

    async def _one_trip(self, statement: Callable[..., Any], *args: Any) -> Any:
        """``statement(connection, *args)`` run whole on the connection's thread: one hand-over.

        aiosqlite's cursor API hands over to its thread for each call (execute, fetch, close): two
        or three per statement, which was half a keyed read's CPU. Its own one-trip helpers
        (``execute_fetchall``, ``execute_insert``) queue a function the same way, through
        ``Connection._execute``: the one place the project reaches past aiosqlite's public API."""
        return await self._conn._execute(statement, self._conn._conn, *args)  # type: ignore[no-untyped-call]

    async def _run(self, begin: bool, statement: Callable[..., Any], *args: Any) -> Any:
        """``statement`` in one hand-over; ``begin`` opens the transaction in the same one."""
        with self._translated():
            if begin:
                return await self._one_trip(_begun, statement, *args)
            return await self._one_trip(statement, *args)

    async def execute(self, sql: str, params: Params, *, begin: bool = False) -> int:
        count: int = await self._run(begin, _rowcount, sql, params)
        return count

    async def execute_without_sync(self, sql: str, params: Params, synchronous: str) -> int:
        count: int = await self._run(False, _without_sync, sql, params, synchronous)
        return count

    async def fetchall(self, sql: str, params: Params, *, begin: bool = False) -> list[tuple[Any, ...]]:
        rows = await self._run(begin, _all_rows, sql, params)
        return [tuple(row) for row in rows]

    async def fetchone(self, sql: str, params: Params, *, begin: bool = False) -> tuple[Any, ...] | None:
        row = await self._run(begin, _first_row, sql, params)
        return None if row is None else tuple(row)

    async def insert(self, sql: str, params: Params, *, begin: bool = False) -> int:
        row = await self._run(begin, _inserted, sql, params)
        if row is None:
            raise AssertionError("SELECT last_insert_rowid() returned no row")
        return int(row[0])

    async def executemany(self, sql: str, rows: list[Sequence[Any]], *, begin: bool = False) -> None:
        await self._run(begin, _each_row, sql, rows)

    async def rollback_quietly(self) -> None:
        # SQLite may already have rolled back (some errors end the transaction by themselves).
        with suppress(sqlite3.OperationalError):
            await self.execute("ROLLBACK", ())


class Transaction:
    """Statements of one `BEGIN IMMEDIATE ... COMMIT`; usable only inside its `async with` block.

    ``BEGIN IMMEDIATE`` goes with the transaction's first statement, in the same hand-over to the
    connection's thread; a transaction that runs no statement begins and commits nothing."""

    __slots__ = ("_open", "_path", "_statements", "begun")

    def __init__(self, statements: _Statements, path: Path) -> None:
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
        statements: _Statements,
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
    ) -> AsyncIterator[Database]:
        """Open (creating if needed) the database, set its pragmas and apply pending migrations."""
        db_path = Path(path)
        check_options(db_path, migrations, synchronous, busy_timeout_ms)
        connector = Connector(db_path, tuple(migrations), synchronous, busy_timeout_ms, load_vec)
        conn = aiosqlite.Connection(connector, iter_chunk_size=64)
        await conn
        try:
            if connector.failure is not None:
                raise connector.failure
            foreign_error = () if connector.error_class is sqlite3.Error else (connector.error_class,)
            statements = _Statements(conn, foreign_error, StorageCondition(db_path))
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
        conn = aiosqlite.Connection(connector, iter_chunk_size=64)
        await conn
        try:
            if connector.failure is not None:
                raise connector.failure
            foreign_error = () if connector.error_class is sqlite3.Error else (connector.error_class,)
            yield Reader(self.path, _Statements(conn, foreign_error, StorageCondition(self.path)))
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
