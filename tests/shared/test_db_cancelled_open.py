"""A database whose opening is cancelled halfway: the open is waited for, then closed.

A server whose input closed while it was starting (``nexo run`` stopped by Ctrl-C) used to leave
its connection's thread opening the file after its event loop had closed; the thread then failed
handing the connection over and printed a traceback ("Event loop is closed") into the log.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.to_thread

from shared.db import Database, Migration

WAIT_S = 10.0


def test_a_cancelled_open_waits_for_the_file_and_leaves_no_thread_behind(tmp_path: Path) -> None:
    migrating, cancelled, migrated = threading.Event(), threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> None:
        migrating.set()
        assert cancelled.wait(WAIT_S), "the open was never cancelled"
        conn.execute("CREATE TABLE t(x INTEGER)")
        migrated.set()

    failures: list[BaseException | None] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    before = set(threading.enumerate())
    outcome: dict[str, bool] = {}
    try:

        async def main() -> None:
            async with anyio.create_task_group() as tg:

                async def open_it() -> None:
                    async with Database.open(tmp_path / "t.db", [Migration("0001_slow", slow)]):
                        await anyio.sleep_forever()

                tg.start_soon(open_it)
                assert await anyio.to_thread.run_sync(migrating.wait, WAIT_S)
                tg.cancel_scope.cancel()
                cancelled.set()
            # The task group has ended: the open it cancelled has finished, not been left running.
            outcome["migrated when the task ended"] = migrated.is_set()

        anyio.run(main)
        for thread in set(threading.enumerate()) - before:
            thread.join(WAIT_S)
            assert not thread.is_alive(), f"{thread.name} still runs after the event loop closed"
    finally:
        threading.excepthook = previous_hook
    assert outcome == {"migrated when the task ended": True}
    assert failures == []
    with sqlite3.connect(tmp_path / "t.db") as conn:
        assert conn.execute("SELECT name FROM _migrations").fetchall() == [("0001_slow",)]
