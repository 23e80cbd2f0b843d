"""``Database.open(..., inline=True)``: statements on the event loop's thread while the connection's
worker thread is idle, handed over (in order) otherwise, and a locked file waited for off the loop."""

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from shared.db import Database, Migration
from shared.db._statements import Statements

pytestmark = pytest.mark.anyio

EVENTS = Migration.sql("0001_events", "CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL);")


def _statements(db: Database) -> Statements:
    statements: Statements = db._statements
    return statements


def _thread_of_statements(db: Database) -> None:
    """``SELECT tid()`` answers the id of the thread the statement runs on."""
    _statements(db)._conn._conn.create_function("tid", 0, threading.get_ident)


@contextmanager
def locked_by_another_connection(path: Path) -> Iterator[sqlite3.Connection]:
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield other
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


class HandOvers:
    """Counts hand-overs to a worker thread as they are sent, and wakes who waits for a number."""

    def __init__(self) -> None:
        self.sent = 0
        self._changed = anyio.Event()

    def note(self) -> None:
        self.sent += 1
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, count: int) -> None:
        with anyio.fail_after(5):
            while self.sent < count:
                await self._changed.wait()


@pytest.fixture
def handovers(monkeypatch: pytest.MonkeyPatch) -> HandOvers:
    seen = HandOvers()
    original = Statements._handed_over

    async def handed_over(self: Statements, *args: Any) -> Any:
        seen.note()
        return await original(self, *args)

    monkeypatch.setattr(Statements, "_handed_over", handed_over)
    return seen


async def test_an_idle_connection_runs_statements_on_the_calling_thread(
    tmp_path: Path, handovers: HandOvers
) -> None:
    async with Database.open(tmp_path / "db.sqlite3", [EVENTS], inline=True) as db:
        _thread_of_statements(db)
        before = handovers.sent
        async with db.transaction() as tx:
            await tx.insert("INSERT INTO events(body) VALUES ('a')")
            in_transaction = await tx.fetchone("SELECT tid()")
        outside = await db.fetchone("SELECT tid()")
        await db.execute("UPDATE events SET body = 'b'", durable=False)
        rows = await db.fetchall("SELECT body FROM events")
        handed_over = handovers.sent - before
    here = threading.get_ident()
    assert (in_transaction, outside, rows, handed_over) == ((here,), (here,), [("b",)], 0)


async def test_without_inline_every_statement_is_handed_over(tmp_path: Path, handovers: HandOvers) -> None:
    async with Database.open(tmp_path / "db.sqlite3", [EVENTS]) as db:
        before = handovers.sent
        await db.fetchone("SELECT 1")
        await db.insert("INSERT INTO events(body) VALUES ('a')")
        handed_over = handovers.sent - before
    assert handed_over == 2


async def test_a_locked_file_is_waited_for_on_the_worker_thread_and_the_loop_stays_free(
    tmp_path: Path, handovers: HandOvers
) -> None:
    path = tmp_path / "db.sqlite3"
    ticks = 0
    async with Database.open(path, [EVENTS], inline=True, busy_timeout_ms=10_000) as db:
        _thread_of_statements(db)
        with locked_by_another_connection(path) as other:
            async with anyio.create_task_group() as tg:

                async def write() -> None:
                    async with db.transaction() as tx:
                        await tx.insert("INSERT INTO events(body) VALUES ('waited')")
                        # Once it holds the lock, the transaction's statements run inline again.
                        assert await tx.fetchone("SELECT tid()") == (threading.get_ident(),)

                tg.start_soon(write)
                await handovers.until(1)
                # The write waits for the lock on the worker thread: the loop goes on meanwhile.
                for _ in range(3):
                    await anyio.lowlevel.checkpoint()
                    ticks += 1
                other.execute("INSERT INTO events(body) VALUES ('other')")
                other.execute("COMMIT")
        rows = await db.fetchall("SELECT body FROM events ORDER BY id")
        timeout = await db.fetchone("PRAGMA busy_timeout")
    assert (ticks, rows, timeout) == (3, [("other",), ("waited",)], (0,))


async def test_a_lock_held_past_the_busy_timeout_is_the_usual_lock_error(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    async with Database.open(path, [EVENTS], inline=True, busy_timeout_ms=0) as db:
        with locked_by_another_connection(path):
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                await db.execute("INSERT INTO events(body) VALUES ('refused')")
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                async with db.transaction() as tx:
                    await tx.execute("INSERT INTO events(body) VALUES ('refused')")
        await db.execute("INSERT INTO events(body) VALUES ('after')")
        rows = await db.fetchall("SELECT body FROM events")
    assert rows == [("after",)]


async def test_a_statement_behind_a_handed_over_one_waits_its_turn(
    tmp_path: Path, handovers: HandOvers
) -> None:
    """While the worker thread has a statement, the next one (here a transaction's, from a task of
    its own) is handed over too and runs after it: statements keep the order they were asked in."""
    path = tmp_path / "db.sqlite3"
    seen: list[tuple[str, int | None]] = []
    async with Database.open(path, [EVENTS], inline=True, busy_timeout_ms=10_000) as db:
        with locked_by_another_connection(path) as other:
            async with db.transaction() as tx, anyio.create_task_group() as tg:

                async def write() -> None:
                    await tx.insert("INSERT INTO events(body) VALUES ('first')")
                    seen.append(("written", None))

                async def read() -> None:
                    row = await tx.fetchone("SELECT count(*) FROM events")
                    seen.append(("read", None if row is None else row[0]))

                tg.start_soon(write)
                await handovers.until(1)
                tg.start_soon(read)
                await handovers.until(2)
                other.execute("COMMIT")
        rows = await db.fetchall("SELECT body FROM events")
    # The read was handed over behind the write (which began the transaction) and saw its row.
    assert (seen, rows) == ([("written", None), ("read", 1)], [("first",)])


async def test_a_transaction_cancelled_while_its_statement_waits_rolls_back_after_it(
    tmp_path: Path, handovers: HandOvers
) -> None:
    path = tmp_path / "db.sqlite3"
    scope = anyio.CancelScope()
    async with Database.open(path, [EVENTS], inline=True, busy_timeout_ms=10_000) as db:
        with locked_by_another_connection(path) as other:

            async def write() -> None:
                with scope:
                    async with db.transaction() as tx:
                        await tx.execute("INSERT INTO events(body) VALUES ('cancelled')")
                        await anyio.sleep_forever()

            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await handovers.until(1)
                scope.cancel()
                # The cancelled statement still waits for the lock on the worker thread: the
                # connection is not idle, so the rollback is handed over behind it.
                await handovers.until(2)
                other.execute("COMMIT")
        await db.execute("INSERT INTO events(body) VALUES ('after')")
        rows = await db.fetchall("SELECT body FROM events")
        transaction_left_open = _statements(db)._conn._conn.in_transaction
    assert (rows, transaction_left_open) == ([("after",)], False)


async def test_a_reader_beside_an_inline_writer_keeps_its_own_thread(tmp_path: Path) -> None:
    async with (
        Database.open(tmp_path / "db.sqlite3", [EVENTS], inline=True) as db,
        db.reader() as reader,
    ):
        await db.insert("INSERT INTO events(body) VALUES ('a')")
        assert await reader.fetchall("SELECT body FROM events") == [("a",)]
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
            await reader.fetchall("INSERT INTO events(body) VALUES ('b') RETURNING id")
