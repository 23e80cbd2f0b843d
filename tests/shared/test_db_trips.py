"""Each statement through the Database handle is one hand-over to the connection's thread."""

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared.db import Database, Migration

pytestmark = pytest.mark.anyio

ITEMS = Migration.sql("0001_items", "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);")


def count_hand_overs(db: Database) -> Callable[[], int]:
    """Counts the functions queued for the writer connection's thread from now on."""
    conn: Any = db._statements._conn
    queued = conn._execute
    calls = 0

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return await queued(fn, *args, **kwargs)

    conn._execute = counted
    return lambda: calls


async def test_every_kind_of_statement_is_one_hand_over_with_the_same_results(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "items.db", [ITEMS]) as db:
        hand_overs = count_hand_overs(db)
        # BEGIN IMMEDIATE with every row, then COMMIT: executemany is all or nothing.
        await db.executemany("INSERT INTO items(id, name) VALUES (?, ?)", [(1, "a"), (2, "b"), (3, "c")])
        assert hand_overs() == 2
        assert await db.execute("UPDATE items SET name = name || '!' WHERE id >= ?", (2,)) == 2
        assert hand_overs() == 3
        assert await db.fetchone("SELECT name FROM items WHERE id = ?", (3,)) == ("c!",)
        assert hand_overs() == 4
        assert await db.fetchone("SELECT name FROM items WHERE id = ?", (9,)) is None
        assert hand_overs() == 5
        assert await db.fetchall("SELECT id FROM items ORDER BY id") == [(1,), (2,), (3,)]
        assert hand_overs() == 6
        assert await db.insert("INSERT INTO items(name) VALUES (?)", ("d",)) == 4
        assert hand_overs() == 7
        # Without waiting for the disk: the pragma, the statement and the pragma put back, at once.
        assert await db.execute("UPDATE items SET name = 'e' WHERE id = 4", durable=False) == 1
        assert hand_overs() == 8
        assert await db.fetchone("PRAGMA synchronous") == (2,)


async def test_a_transaction_begins_with_its_first_statement_and_one_without_statements_is_nothing(
    tmp_path: Path,
) -> None:
    async with Database.open(tmp_path / "items.db", [ITEMS]) as db:
        hand_overs = count_hand_overs(db)
        async with db.transaction() as tx:
            assert await tx.fetchone("SELECT count(*) FROM items") == (0,)
            assert hand_overs() == 1  # BEGIN IMMEDIATE went with it
            await tx.execute("INSERT INTO items(name) VALUES ('a')")
            # A statement through the handle from inside joins the transaction.
            assert await db.fetchall("SELECT name FROM items") == [("a",)]
        assert hand_overs() == 4  # and COMMIT
        async with db.transaction():
            pass
        assert hand_overs() == 4
        with pytest.raises(RuntimeError, match="no"):
            await _insert_then_fail(db)
        assert await db.fetchall("SELECT name FROM items") == [("a",)]


async def _insert_then_fail(db: Database) -> None:
    async with db.transaction() as tx:
        await tx.execute("INSERT INTO items(name) VALUES ('b')")
        raise RuntimeError("no")


async def test_the_transaction_holds_the_write_lock_from_its_first_statement_to_its_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "items.db"
    async with Database.open(path, [ITEMS], busy_timeout_ms=0) as db:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            async with db.transaction() as tx:
                other.execute("INSERT INTO items(name) VALUES ('before')")  # not begun yet: free
                await tx.fetchone("SELECT count(*) FROM items")
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("INSERT INTO items(name) VALUES ('during')")
            other.execute("INSERT INTO items(name) VALUES ('after')")
        finally:
            other.close()
        assert await db.fetchall("SELECT name FROM items ORDER BY id") == [("before",), ("after",)]


async def test_a_failing_statement_raises_the_same_error_and_leaves_nothing_open(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "items.db", [ITEMS]) as db:
        await db.execute("INSERT INTO items(id, name) VALUES (1, 'a')")
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            await db.execute("INSERT INTO items(id, name) VALUES (2, 'a')")
        with pytest.raises(sqlite3.OperationalError, match="no such column"):
            await db.fetchone("SELECT missing FROM items")
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            await db.executemany("INSERT INTO items(id, name) VALUES (?, ?)", [(3, "c"), (4, "a")])
        # The rows that failed half-way were rolled back together, and the connection goes on answering.
        assert await db.fetchall("SELECT id, name FROM items ORDER BY id") == [(1, "a")]
        assert await db.insert("INSERT INTO items(name) VALUES (?)", ("b",)) == 2
