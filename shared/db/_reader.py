"""A second, read-only connection to a database: reads that run beside the writer's statements.

Every statement of a `Database` goes through its one aiosqlite connection, one at a time, so two
tasks reading at once wait for each other. A `Reader` is another connection to the same file, on
its own worker thread: its reads overlap the writer connection's work (SQLite and the standard
library's driver release the GIL while a statement steps). Under WAL each of its statements reads
the last committed state, so it never sees a transaction still open on the writer and sees every
one committed before the statement starts. `PRAGMA query_only` refuses any write through it.
"""

from __future__ import annotations

import importlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from shared.db._errors import DatabaseError, problem


class Reads(Protocol):
    """What reading code needs: a `Database` (the writer connection) or a `Reader` (its own)."""

    async def fetchall(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]: ...

    async def fetchone(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None: ...


class _Sends(Protocol):
    async def fetchall(self, sql: str, params: Any) -> list[tuple[Any, ...]]: ...

    async def fetchone(self, sql: str, params: Any) -> tuple[Any, ...] | None: ...


@dataclass(slots=True)
class ReadConnector:
    """Builds the read-only connection on its aiosqlite worker thread (see `shared.db._connect.Connector`)."""

    path: Path
    driver: str
    busy_timeout_ms: int
    error_class: type[Exception] = sqlite3.Error
    failure: DatabaseError | None = None

    def __call__(self) -> Any:
        module = importlib.import_module(self.driver)
        self.error_class = module.Error
        try:
            conn = module.connect(str(self.path), isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        except module.Error as exc:
            self.failure = problem(self.path, f"cannot open a read-only connection: {exc}", "check the file")
            return sqlite3.connect(":memory:")
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            conn.execute("PRAGMA query_only = ON")
        except module.Error as exc:
            conn.close()
            self.failure = problem(self.path, f"cannot open a read-only connection: {exc}", "check the file")
            return sqlite3.connect(":memory:")
        return conn


class Reader:
    """Read-only statements on a connection of their own (see the module docstring)."""

    __slots__ = ("_statements", "path")

    def __init__(self, path: Path, statements: _Sends) -> None:
        self.path = path
        self._statements = statements

    async def fetchall(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return await self._statements.fetchall(sql, params)

    async def fetchone(self, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
        return await self._statements.fetchone(sql, params)
