"""The reported fault end to end: with the state directory on a full filesystem, each message typed
into the console chat is refused with one sentence and the console server stays up (no restart);
the running daemon's status (what `nexo status`, `nexo chat` and `nexo setup doctor` show) names the
condition, the operator is told once, and it all clears once space is freed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from orchestrator.control import ask_status
from orchestrator.sockets import control_path
from orchestrator.storage_report import FIX, storage_findings
from shared.protocol.console_wire import Error, Say
from tests.full_disk import FullDisk, refusal
from tests.mesh.console import operator
from tests.mesh.harness import nexo, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

MESSAGES = 3
LONG = "please keep this whole note for later. " * 500
"""Longer than any page SQLite already holds, so the write needs new space and is refused."""
WAIT_S = 60


async def test_a_full_state_disk_refuses_chat_messages_in_one_sentence_and_the_daemon_reports_it(
    full_disk: FullDisk,
) -> None:
    state = full_disk.root / "state"
    config = write_config(
        full_disk.root.parent / "nexo.yaml",
        state_dir=state,
        llm_base_url="http://127.0.0.1:9/v1",
        extra={"supervision": {"initial_backoff_s": 0.05, "max_backoff_s": 0.5, "storage_check_s": 0.2}},
    )
    database = state / "console" / "console.db"
    told_line = f"server console: the disk holding {database} is full since"
    with running(config) as orch, anyio.fail_after(WAIT_S):
        full_disk.fill()
        async with operator(state) as session:
            refused: list[Any] = []
            for n in range(MESSAGES):
                await session.send(Say(id=f"m{n}", text=LONG))
                frame = await session.receive()
                while not isinstance(frame, Error):  # the welcome and the standing warnings
                    frame = await session.receive()
                refused.append(frame.message)
        told = await anyio.to_thread.run_sync(orch.wait_for_line, told_line)
        status = await ask_status(control_path(state))
        findings = storage_findings(state, status)
        shown = await anyio.to_thread.run_sync(lambda: nexo("status", "--config", str(config)))

        full_disk.free()
        space_again = f"server console: the disk holding {database} has space again"
        await anyio.to_thread.run_sync(lambda: orch.wait_for_line(space_again, start=told))
        cleared = await ask_status(control_path(state))
    log = orch.log()

    assert refused == [refusal(database)] * MESSAGES
    [full] = status["storage"]
    assert (full["server"], full["path"]) == ("console", str(database))
    assert told_line in " ".join(status["warnings"])
    assert shown.returncode == 2
    assert shown.stdout.startswith(f"WARNING: {told_line}")
    console = next(server for server in status["servers"] if server["name"] == "console")
    assert (console["state"], console["restarts"]) == ("ready", 0)
    assert [(f.level, f.check, f.subject, f.fix) for f in findings] == [
        ("error", "storage.full", "console", FIX),
        ("error", "storage.free", str(state), FIX),
    ]
    # Told once per condition, however many messages were refused.
    assert log.count(told_line) == 1
    assert log.count(f"the disk holding {database} is full: writes are refused") == 1
    assert "Traceback" not in log
    assert cleared["storage"] == []
