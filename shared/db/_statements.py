"""The statements of a connection, and how each reaches it: handed over to the aiosqlite connection's
worker thread, or run on the event loop's thread ("inline").

A hand-over costs about 130 us of CPU (a queue, a thread woken, a result posted back to the loop) and
a wake-up of each side, against about 10 us for a keyed read run where it is asked for. A
`Database` opened with ``inline=True`` runs each statement on the calling thread whenever the worker
thread has nothing queued or running (statements still run one at a time, in the order asked, so
transactions and cancellation behave as on the thread), and hands over otherwise. Its writer
connection waits for no lock (``PRAGMA busy_timeout = 0``): a statement that finds the file locked
by another connection is handed over and waits there, up to the file's busy timeout, leaving the
loop free. What stays on the loop is the statements themselves, a commit's fsync included: for
files of small keyed statements whose writer is this process (the ledger, the outboxes, the pairing
table), not for long scans or recall.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeAlias

import aiosqlite

from shared.db._drivers import as_stdlib_error
from shared.db._storage import StorageCondition, StorageFull, is_storage_full

Params: TypeAlias = Sequence[Any] | Mapping[str, Any]

_SQLITE_BUSY = 5


@dataclass(frozen=True, slots=True)
class Inline:
    """A connection whose statements may run on the event loop's thread (module docstring)."""

    busy_timeout_ms: int
    """How long a statement handed over because the file was locked waits for the lock."""


def _is_busy(exc: BaseException) -> bool:
    """The file is locked by another connection (SQLITE_BUSY and its extended codes)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_BUSY
    return "database is locked" in str(exc)


def _patiently(conn: Any, busy_timeout_ms: int, statement: Callable[..., Any], *args: Any) -> Any:
    """``statement(conn, *args)`` waiting up to ``busy_timeout_ms`` for the file's lock (an inline
    connection's own timeout is 0)."""
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}").close()
    try:
        return statement(conn, *args)
    finally:
        conn.execute("PRAGMA busy_timeout = 0").close()


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


class Statements:
    """The statements every handle offers, all run on the single aiosqlite connection: on its
    worker thread, or on the calling (event loop's) thread when ``inline`` (module docstring)."""

    __slots__ = ("_conn", "_done", "_errors", "_foreign_error", "_inline", "_sent", "storage")

    def __init__(
        self,
        conn: aiosqlite.Connection,
        error_class: type[Exception],
        storage: StorageCondition,
        *,
        inline: Inline | None = None,
    ) -> None:
        self._conn = conn
        # A driver other than the standard library raises exceptions of its own (``_translated``).
        self._foreign_error: tuple[type[Exception], ...] = (
            () if error_class is sqlite3.Error else (error_class,)
        )
        self._errors: tuple[type[Exception], ...] = (sqlite3.Error, *self._foreign_error)
        self.storage = storage
        self._inline = inline
        # Hand-overs sent (counted on the loop's thread) and finished (on the worker thread): each
        # counter has one writer, and the connection is idle when they are equal.
        self._sent = 0
        self._done = 0

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
        """``statement(connection, *args)`` run whole: one hand-over to the connection's thread, or
        none when ``inline`` and the thread has nothing left to run (module docstring)."""
        raw = self._conn._conn
        inline = self._inline
        if inline is None:
            return await self._handed_over(statement, raw, *args)
        if self._sent == self._done:
            try:
                return statement(raw, *args)
            except self._errors as exc:
                if not _is_busy(exc) or (statement is _begun and raw.in_transaction):
                    raise
            # Another connection holds the file's lock: wait for it on the worker thread, as long
            # as the file's busy timeout allows, and leave the loop free meanwhile.
        return await self._handed_over(_patiently, raw, inline.busy_timeout_ms, statement, *args)

    async def _handed_over(self, statement: Callable[..., Any], *args: Any) -> Any:
        """``statement(*args)`` on the connection's worker thread.

        aiosqlite's cursor API hands over to its thread for each call (execute, fetch, close): two
        or three per statement, which was half a keyed read's CPU. Its own one-trip helpers
        (``execute_fetchall``, ``execute_insert``) queue a function the same way, through
        ``Connection._execute``: the one place the project reaches past aiosqlite's public API."""
        self._sent += 1
        return await self._conn._execute(self._counted, statement, *args)  # type: ignore[no-untyped-call]

    def _counted(self, statement: Callable[..., Any], *args: Any) -> Any:
        """On the worker thread: ``statement(*args)``, then one more hand-over finished, also when a
        cancelled caller stopped waiting for it (the connection is busy until then)."""
        try:
            return statement(*args)
        finally:
            self._done += 1

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
