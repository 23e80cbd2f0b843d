"""Database.reader(): a read-only connection of its own, beside the writer's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from shared.db import Database, Migration

pytestmark = pytest.mark.anyio

EVENTS = Migration.sql("0001_events", "CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL);")


async def test_a_reader_sees_each_commit_at_once_and_never_an_open_transaction(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "db.sqlite", [EVENTS]) as db, db.reader() as reader:
        assert await reader.fetchall("SELECT body FROM events") == []
        await db.execute("INSERT INTO events(body) VALUES ('first')")
        assert await reader.fetchall("SELECT body FROM events") == [("first",)]
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO events(body) VALUES ('pending')")
            assert await reader.fetchall("SELECT body FROM events ORDER BY id") == [("first",)]
        assert await reader.fetchall("SELECT body FROM events ORDER BY id") == [("first",), ("pending",)]
        assert await reader.fetchone("SELECT count(*) FROM events") == (2,)


async def test_a_reader_reads_while_the_writer_holds_a_transaction(tmp_path: Path) -> None:
    """What lets a hybrid recall's two sides read at once: a statement on the writer connection
    waits for the open transaction; the reader's does not."""
    async with Database.open(tmp_path / "db.sqlite", [EVENTS]) as db, db.reader() as reader:
        await db.execute("INSERT INTO events(body) VALUES ('kept')")
        holding, release = anyio.Event(), anyio.Event()
        writer_read: list[tuple[object, ...]] = []

        async def hold_transaction() -> None:
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO events(body) VALUES ('later')")
                holding.set()
                await release.wait()

        async def read_on_writer() -> None:
            writer_read.extend(await db.fetchall("SELECT body FROM events ORDER BY id"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_transaction)
            await holding.wait()
            tg.start_soon(read_on_writer)
            with anyio.fail_after(5):
                assert await reader.fetchall("SELECT body FROM events") == [("kept",)]
            assert writer_read == []
            release.set()
        assert writer_read == [("kept",), ("later",)]


async def test_a_reader_refuses_to_write(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "db.sqlite", [EVENTS]) as db, db.reader() as reader:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await reader.fetchall("INSERT INTO events(body) VALUES ('no') RETURNING id")
        assert await db.fetchall("SELECT * FROM events") == []


async def test_a_reader_of_a_vec_database_uses_the_writers_driver(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "db.sqlite", [EVENTS], load_vec=True) as db, db.reader() as reader:
        await db.execute("INSERT INTO events(body) VALUES ('x')")
        assert await reader.fetchone("SELECT sqlite_version()") == await db.fetchone(
            "SELECT sqlite_version()"
        )
        assert await reader.fetchall("SELECT body FROM events") == [("x",)]
