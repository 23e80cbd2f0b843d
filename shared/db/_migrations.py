"""Named schema migrations, recorded in the database they changed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.db._errors import problem


def split_statements(script: str) -> list[str]:
    """Split an SQL script into single statements (trigger bodies and quoted `;` stay whole)."""
    statements: list[str] = []
    start = 0
    for index, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : index + 1]):
            statements.append(script[start : index + 1].strip())
            start = index + 1
    tail = script[start:].strip()
    if tail:
        statements.append(tail)
    return statements


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step. `apply` runs on the writer thread inside the migration's transaction."""

    name: str
    apply: Callable[[sqlite3.Connection], None]

    @classmethod
    def sql(cls, name: str, script: str) -> Migration:
        """A migration made of SQL statements, run one by one.

        `executescript` would commit the migration transaction before running, so it is avoided.
        """
        statements = split_statements(script)

        def apply(conn: sqlite3.Connection) -> None:
            for statement in statements:
                conn.execute(statement)

        return cls(name, apply)


def migrate(conn: Any, path: Path, migrations: Sequence[Migration]) -> None:
    """Apply the pending migrations in order, each in its own transaction, and record them."""
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations(name TEXT PRIMARY KEY, applied_at TEXT)")
    recorded = [name for (name,) in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    known = {migration.name for migration in migrations}
    unknown = [name for name in recorded if name not in known]
    if unknown:
        raise problem(
            path,
            f"the database has migration(s) {', '.join(unknown)} that this version does not know "
            "(it was written by a newer version)",
            "run the newer version again, or restore a backup taken before it ran",
        )
    for migration in migrations:
        if migration.name in recorded:
            continue
        conn.execute("BEGIN IMMEDIATE")
        # Another process may have applied it between the read above and taking the write lock.
        if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (migration.name,)).fetchone():
            conn.execute("ROLLBACK")
            continue
        try:
            migration.apply(conn)
        except Exception as exc:
            # A migration that ended its own transaction (executescript, COMMIT) cannot be undone.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
                raise problem(
                    path,
                    f"migration {migration.name} failed and was rolled back: {exc}",
                    "correct the migration; the database is as it was before it",
                ) from exc
            raise problem(
                path,
                f"migration {migration.name} failed after ending its own transaction: {exc}",
                "correct the migration and restore a backup: part of it may have been applied",
            ) from exc
        if not conn.in_transaction:
            raise problem(
                path,
                f"migration {migration.name} ended its own transaction, so it was not atomic",
                "run statements with conn.execute or use Migration.sql (executescript commits first)",
            )
        conn.execute(
            "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
            (migration.name, datetime.now(UTC).isoformat(timespec="seconds")),
        )
        conn.execute("COMMIT")
