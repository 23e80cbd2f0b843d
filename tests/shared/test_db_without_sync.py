"""Statements committed without waiting for the disk (``durable=False``): the connection's own mode
comes back at once, and a process killed right after such a commit keeps it, so the console's ack,
delivery count and sent mark (the writes of a turn that no longer wait for the disk) are never lost
to a SIGKILL: no message is answered or shown twice."""

from __future__ import annotations

import signal
import sqlite3
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from channel_servers.console.store import open_store
from shared.db import Database, Migration

pytestmark = pytest.mark.anyio

COUNTER = Migration.sql(
    "0001_counter", "CREATE TABLE counter(n INTEGER NOT NULL); INSERT INTO counter VALUES (0);"
)


async def test_a_statement_without_sync_commits_and_the_mode_comes_back(tmp_path: Path) -> None:
    async with Database.open(tmp_path / "x.db", [COUNTER], synchronous="FULL") as db:
        assert await db.execute("UPDATE counter SET n = n + 1", durable=False) == 1
        assert await db.fetchone("PRAGMA synchronous") == (2,)  # FULL again
        async with db.transaction() as tx:
            # Inside a transaction the transaction's commit decides: the statement just joins it.
            await db.execute("UPDATE counter SET n = n + 1", durable=False)
            assert await tx.fetchone("PRAGMA synchronous") == (2,)
    with sqlite3.connect(tmp_path / "x.db") as conn:
        assert conn.execute("SELECT n FROM counter").fetchone() == (2,)


KILLED_AFTER_A_TURN = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import anyio
    from channel_servers.console.store import open_store

    async def main() -> None:
        async with open_store(Path(sys.argv[1]), max_pending=10) as store:
            await store.events.append("message", "console:op:m1", {"content": "hi", "meta": {}})
            [event] = await store.events.pull(after=0, limit=10)
            begun = await store.outbox.begin("reply:console:console:op:m1", "op", "hello", None)
            await store.outbox.mark_sent(begun.entry.id, "console-1")
            await store.events.ack([event.seq])
            os.kill(os.getpid(), signal.SIGKILL)

    anyio.run(main)
    """
)


@pytest.mark.scenario
async def test_a_kill_right_after_a_turns_unsynced_writes_loses_none_of_them(tmp_path: Path) -> None:
    database = tmp_path / "console.db"
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-c", KILLED_AFTER_A_TURN, str(database)], check=False
        )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    async with open_store(database, max_pending=10) as store:
        # Acknowledged: not handed out again, so the message is not answered twice.
        assert await store.events.pull(after=0, limit=10) == []
        assert await store.outbox.recover() == []  # sent, not `sending`: nothing becomes uncertain
        [row] = await store.db.fetchall("SELECT status, provider_id FROM outbox")
        assert row == ("sent", "console-1")
        assert await store.db.fetchall("SELECT deliveries FROM events") == [(1,)]
