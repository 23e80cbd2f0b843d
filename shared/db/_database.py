"""The Database handle: opening the file, the writer connection, statements and transactions."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import aiosqlite
import anyio

from shared.db._drivers import as_stdlib_error, connect_with_vec
from shared.db._errors import DatabaseError, problem
from shared.db._migrations import Migration, migrate
from shared.db._reader import ReadConnector, Reader
from shared.db._storage import StorageCondition, StorageFull, is_storage_full
from shared.private import make_private_dirs

Params: TypeAlias = Sequence[Any] | Mapping[str, Any]
Synchronous: TypeAlias = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_SYNCHRONOUS_MODES: tuple[Synchronous, ...] = ("OFF", "NORMAL", "FULL", "EXTRA")


def _make_private_file(path: Path) -> None:
    # Created before SQLite opens it so it is never readable by others, not even for an instant;
    # SQLite gives the -wal and -shm files the mode of the main file.
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if file.exists():
            file.chmod(0o600)


def _set_pragmas(conn: Any, path: Path, synchronous: Synchronous, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise problem(
            path,
            f"SQLite refused write-ahead logging (journal mode stays {mode})",
            "keep the database on a local filesystem (not a network share)",
        )
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")


@dataclass(slots=True)
class _Connector:
    """Builds the writer connection on aiosqlite's worker thread, so no file work blocks the loop."""

    path: Path
    migrations: Sequence[Migration]
    synchronous: Synchronous
    busy_timeout_ms: int
    load_vec: bool
    driver: str = "sqlite3"
    error_class: type[Exception] = sqlite3.Error
    failure: DatabaseError | None = None

    def __call__(self) -> sqlite3.Connection:
        try:
            return self._open()  # type: ignore[no-any-return]
        except DatabaseError as exc:
            # When a connector raises, aiosqlite stops its worker thread without waiting for it, and
            # the thread may then call into an event loop that is already closed. A stand-in
            # connection lets open() report the failure after closing the thread in order.
            self.failure = exc
            return sqlite3.connect(":memory:")

    def _open(self) -> Any:
        try:
            make_private_dirs(self.path.parent)
            _make_private_file(self.path)
        except OSError as exc:
            if is_storage_full(exc):
                raise StorageFull(self.path) from exc
            raise problem(
                self.path,
                f"cannot create the database file: {exc.strerror} ({exc.filename})",
                "point the state directory at a place this user can write",
            ) from exc
        timeout = self.busy_timeout_ms / 1000
        conn: Any = None
        try:
            if self.load_vec:
                self.driver, module, conn = connect_with_vec(str(self.path), self.path, timeout)
                self.error_class = module.Error
            else:
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=timeout)
            _set_pragmas(conn, self.path, self.synchronous, self.busy_timeout_ms)
            migrate(conn, self.path, self.migrations)
        except Exception as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, DatabaseError):
                raise
            if is_storage_full(exc):
                raise StorageFull(self.path) from exc
            raise problem(
                self.path,
                f"cannot open the database: {exc}",
                "check the file is an SQLite database (restore it from a backup if it is damaged)",
            ) from exc
        return conn


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

    async def execute(self, sql: str, params: Params) -> int:
        with self._translated():
            async with self._conn.execute(sql, params) as cursor:
                return cursor.rowcount

    async def fetchall(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        with self._translated():
            rows = await self._conn.execute_fetchall(sql, params)
        return [tuple(row) for row in rows]

    async def fetchone(self, sql: str, params: Params) -> tuple[Any, ...] | None:
        with self._translated():
            async with self._conn.execute(sql, params) as cursor:
                row = await cursor.fetchone()
        return None if row is None else tuple(row)

    async def insert(self, sql: str, params: Params) -> int:
        with self._translated():
            row = await self._conn.execute_insert(sql, params)
        if row is None:
            raise AssertionError("SELECT last_insert_rowid() returned no row")
        return int(row[0])

    async def executemany(self, sql: str, rows: list[Sequence[Any]]) -> None:
        with self._translated():
            async with self._conn.executemany(sql, rows):
                pass

    async def rollback_quietly(self) -> None:
        # SQLite may already have rolled back (some errors end the transaction by themselves).
        with suppress(sqlite3.OperationalError):
            await self.execute("ROLLBACK", ())


class Transaction:
    """Statements of one `BEGIN IMMEDIATE ... COMMIT`; usable only inside its `async with` block."""

    __slots__ = ("_open", "_path", "_statements")

    def __init__(self, statements: _Statements, path: Path) -> None:
        self._statements = statements
        self._path = path
        self._open = True

    @property
    def is_open(self) -> bool:
        return self._open

    def _close(self) -> None:
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise problem(
                self._path,
                "the transaction is already finished",
                "use the Transaction only inside its `async with db.transaction()` block",
            )

    async def execute(self, sql: str, params: Params = ()) -> int:
        self._check_open()
        return await self._statements.execute(sql, params)

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        self._check_open()
        return await self._statements.fetchall(sql, params)

    async def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        self._check_open()
        return await self._statements.fetchone(sql, params)

    async def insert(self, sql: str, params: Params = ()) -> int:
        self._check_open()
        return await self._statements.insert(sql, params)

    async def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        self._check_open()
        await self._statements.executemany(sql, list(seq))


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
        _check_options(db_path, migrations, synchronous, busy_timeout_ms)
        connector = _Connector(db_path, tuple(migrations), synchronous, busy_timeout_ms, load_vec)
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

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        current = self._current.get()
        if current is not None and current.is_open:
            yield
        else:
            async with self._lock:
                yield

    async def execute(self, sql: str, params: Params = (), *, durable: bool = True) -> int:
        """Run one statement; returns the row count. Commits at once unless inside `transaction()`.

        ``durable=False`` commits without waiting for the disk (``synchronous=NORMAL`` for this one
        statement): the change survives the process being killed and reaches the disk with the next
        durable commit or checkpoint, but a power cut before then can undo it. Only for bookkeeping
        whose loss the owner's recovery already handles (an acknowledgement, a delivery count).
        Inside `transaction()` the transaction's own commit decides.
        """
        current = self._current.get()
        if not durable and self.synchronous in ("FULL", "EXTRA") and (current is None or not current.is_open):
            return await self._execute_without_sync(sql, params)
        async with self._slot():
            count = await self._statements.execute(sql, params)
        self._stored_outside_transaction()
        return count

    async def _execute_without_sync(self, sql: str, params: Params) -> int:
        async with self._lock:
            await self._statements.execute("PRAGMA synchronous = NORMAL", ())
            try:
                count = await self._statements.execute(sql, params)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._statements.execute(f"PRAGMA synchronous = {self.synchronous}", ())
        self._statements.storage.stored()
        return count

    async def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        async with self._slot():
            return await self._statements.fetchall(sql, params)

    async def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        async with self._slot():
            return await self._statements.fetchone(sql, params)

    async def insert(self, sql: str, params: Params = ()) -> int:
        """Run an INSERT; returns `last_insert_rowid()` (unchanged when nothing was inserted)."""
        async with self._slot():
            rowid = await self._statements.insert(sql, params)
        self._stored_outside_transaction()
        return rowid

    async def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        """Run one statement per parameter row, all in one transaction (one fsync, all or nothing)."""
        current = self._current.get()
        if current is not None and current.is_open:
            await current.executemany(sql, seq)
            return
        async with self.transaction() as transaction:
            await transaction.executemany(sql, seq)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` when the block raises or is cancelled."""
        current = self._current.get()
        if current is not None and current.is_open:
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
                    await self._statements.execute("BEGIN IMMEDIATE", ())
                    yield transaction
                    await self._statements.execute("COMMIT", ())
                    self._statements.storage.stored()
                except BaseException:
                    # Statements run in queue order, so this ROLLBACK follows any statement a
                    # cancelled await left queued.
                    with anyio.CancelScope(shield=True):
                        await self._statements.rollback_quietly()
                    raise
            finally:
                transaction._close()
                self._current.reset(token)

    def _stored_outside_transaction(self) -> None:
        current = self._current.get()
        if current is None or not current.is_open:
            self._statements.storage.stored()


def _check_options(
    path: Path, migrations: Sequence[Migration], synchronous: str, busy_timeout_ms: int
) -> None:
    if str(path) == ":memory:":
        raise problem(path, "in-memory databases are not supported", "give a file path")
    if synchronous not in _SYNCHRONOUS_MODES:
        raise problem(
            path, f"synchronous={synchronous!r} is not a mode", f"use one of {', '.join(_SYNCHRONOUS_MODES)}"
        )
    if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
        raise problem(path, f"busy_timeout_ms={busy_timeout_ms!r} is invalid", "use a whole number >= 0")
    names = [migration.name for migration in migrations]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise problem(path, f"migration names repeat: {', '.join(duplicates)}", "give each one a new name")
