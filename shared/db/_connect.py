"""Opening the writer connection: the private file, the options checked, the pragmas, migrations."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from shared.db._drivers import connect_with_vec
from shared.db._errors import DatabaseError, problem
from shared.db._migrations import Migration, migrate
from shared.db._storage import StorageFull, is_storage_full
from shared.private import make_private_dirs

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
class Connector:
    """Builds the writer connection on aiosqlite's worker thread, so no file work blocks the loop."""

    path: Path
    migrations: Sequence[Migration]
    synchronous: Synchronous
    busy_timeout_ms: int
    load_vec: bool
    inline: bool = False
    """The connection is used from the event loop's thread too (``shared.db._statements``): made
    usable from any thread, and waiting for no lock once migrated (handed-over statements wait)."""
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
                self.driver, module, conn = connect_with_vec(
                    str(self.path), self.path, timeout, any_thread=self.inline
                )
                self.error_class = module.Error
            else:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, timeout=timeout, check_same_thread=not self.inline
                )
            _set_pragmas(conn, self.path, self.synchronous, self.busy_timeout_ms)
            migrate(conn, self.path, self.migrations)
            if self.inline:
                conn.execute("PRAGMA busy_timeout = 0")
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


def check_options(
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
