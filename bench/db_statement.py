"""CPU of one SQLite statement through the project's Database handle, beside aiosqlite's cursor API.

``python -m bench.db_statement [--quick]``. Every server keeps its state in SQLite through
``shared.db.Database``, which sends each statement to the connection's own thread. What a statement
costs there is mostly the hand-overs between the event loop and that thread, not SQLite's work.

Rows (process CPU per statement, in µs, one sample per round of ``STATEMENTS`` statements):
- a keyed read (``fetchone`` of one row by primary key), ours beside aiosqlite's cursor API
  (``execute``, ``fetchone``, closing the cursor: three hand-overs), which is how the handle sent it
  before it queued each statement whole;
- an update by key (``execute``, the row count back), beside aiosqlite's cursor API (two hand-overs).

- the same keyed read and update on a handle opened with ``inline=True`` (the statement runs on the
  event loop's thread while the connection's worker thread is idle: no hand-over), beside ours.

Both sides use the same file, the same connection settings and the same rows, alternating per round.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.mesh_run import workdir
from bench.stats import Result, run_alone
from bench.support import describe, progress
from shared.db import Database, Migration

ROWS = 1_000
STATEMENTS = 2_000
ROUNDS = 12
QUICK_ROUNDS = 4
SCHEMA = Migration.sql("0001_items", "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, hits INTEGER);")

Statement = Callable[[int], Awaitable[object]]


async def _cpu_per_statement_us(statement: Statement) -> float:
    start = time.process_time()
    for n in range(STATEMENTS):
        await statement(n % ROWS + 1)
    return (time.process_time() - start) / STATEMENTS * 1e6


async def _cursor_read(db: Database, key: int) -> object:
    conn = db._statements._conn  # the same aiosqlite connection, used the cursor way
    async with conn.execute("SELECT name, hits FROM items WHERE id = ?", (key,)) as cursor:
        return await cursor.fetchone()


async def _cursor_update(db: Database, key: int) -> object:
    conn = db._statements._conn
    async with conn.execute("UPDATE items SET hits = hits + 1 WHERE id = ?", (key,)) as cursor:
        return cursor.rowcount


@dataclass(frozen=True, slots=True)
class _Rows:
    read: Result
    update: Result
    inline_read: Result
    inline_update: Result


async def _measure(rounds: int) -> list[Result]:
    rows = _Rows(
        Result("db statement: keyed read (fetchone)", "µs CPU", "aiosqlite cursor: execute, fetchone, close"),
        Result("db statement: update by key (execute)", "µs CPU", "aiosqlite cursor: execute, close"),
        Result("db statement: keyed read, inline", "µs CPU", "the same, handed over (one trip)"),
        Result("db statement: update by key, inline", "µs CPU", "the same, handed over (one trip)"),
    )
    try:
        with workdir() as directory:
            await _rounds(rounds, directory, rows)
    except Exception as exc:  # noqa: BLE001 -- reported in the table instead of aborting the run
        rows.read.errors.append(describe(exc))
    return [rows.read, rows.update, rows.inline_read, rows.inline_update]


def _read(db: Database) -> Statement:
    return lambda key: db.fetchone("SELECT name, hits FROM items WHERE id = ?", (key,))


def _update(db: Database) -> Statement:
    return lambda key: db.execute("UPDATE items SET hits = hits + 1 WHERE id = ?", (key,))


async def _rounds(rounds: int, directory: Path, rows: _Rows) -> None:
    # synchronous=OFF: the update rows time the hand-overs, not the disk's sync.
    path = directory / "statements.db"
    async with (
        Database.open(path, [SCHEMA], synchronous="OFF") as db,
        Database.open(path, [SCHEMA], synchronous="OFF", inline=True) as inline,
    ):
        await db.executemany(
            "INSERT INTO items (id, name, hits) VALUES (?, ?, 0)",
            [(n, f"item {n}") for n in range(1, ROWS + 1)],
        )
        for round_ in range(rounds):
            progress(f"db statement: round {round_ + 1} of {rounds}")
            # Ours handed over is the sample of one row and the baseline of the inline row.
            handed_over = await _cpu_per_statement_us(_read(db))
            rows.read.samples.append(handed_over)
            rows.read.baseline.append(await _cpu_per_statement_us(lambda key: _cursor_read(db, key)))
            rows.inline_read.samples.append(await _cpu_per_statement_us(_read(inline)))
            rows.inline_read.baseline.append(handed_over)
            handed_over = await _cpu_per_statement_us(_update(db))
            rows.update.samples.append(handed_over)
            rows.update.baseline.append(await _cpu_per_statement_us(lambda key: _cursor_update(db, key)))
            rows.inline_update.samples.append(await _cpu_per_statement_us(_update(inline)))
            rows.inline_update.baseline.append(handed_over)


def measure(quick: bool) -> list[Result]:
    return anyio.run(_measure, QUICK_ROUNDS if quick else ROUNDS)


def main(argv: list[str] | None = None) -> int:
    return run_alone("db_statement", measure, argv)


if __name__ == "__main__":
    sys.exit(main())
