"""The audit server as a real process: ``python -m servers.audit`` over stdio."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import MCPError, StdioServerParameters
from mcp.client import Client

from servers.audit.store import verify_file
from shared.protocol.audit.entries import Appended
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    VerifyParams,
    VerifyRequest,
    VerifyResult,
)
from tests.mesh.harness import REPO, child_pids
from tests.servers.audit.conftest import notice, rows, turn

pytestmark = pytest.mark.anyio


def server_params(state_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_AUDIT_STATE_DIR": str(state_dir), "NEXO_LOG_LEVEL": "WARNING"})
    return StdioServerParameters(command=sys.executable, args=["-m", "servers.audit"], env=env, cwd=str(REPO))


async def test_the_server_runs_over_stdio_with_its_tools_and_control_plane(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Client(server_params(tmp_path)) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            appended = await client.session.send_request(
                AppendRequest(params=AppendParams(entries=[turn("g-1", 0), notice("over stdio")])),
                AppendResult,
            )
            report = await client.session.send_request(VerifyRequest(params=VerifyParams()), VerifyResult)
            table = await client.call_tool("agent_turns_tail", {"goal_id": "g-1"})
    assert tools == ["agent_turns_tail", "audit_search"]
    assert [entry.seq for entry in appended.entries] == [1, 2]
    assert (report.report.ok, report.report.checked) == (True, 2)
    assert table.is_error is False
    assert (tmp_path / "audit" / "audit.db").stat().st_mode & 0o777 == 0o600


@pytest.mark.scenario
async def test_every_acknowledged_append_survives_a_kill_9_of_the_server(tmp_path: Path) -> None:
    acknowledged: list[Appended] = []
    enough = anyio.Event()

    async def appender(client: Client, worker: int) -> None:
        for i in range(10_000):
            request = AppendRequest(params=AppendParams(entries=[notice(f"w{worker} #{i}")]))
            try:
                result = await client.session.send_request(request, AppendResult)
            except MCPError:
                return
            acknowledged.extend(result.entries)
            if len(acknowledged) >= 300:
                enough.set()

    with anyio.fail_after(60):
        try:
            async with Client(server_params(tmp_path)) as client, anyio.create_task_group() as tg:
                for worker in range(8):
                    tg.start_soon(appender, client, worker)
                await enough.wait()
                [pid] = child_pids(os.getpid(), "servers.audit")
                os.kill(pid, signal.SIGKILL)
        except* (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
    database = tmp_path / "audit" / "audit.db"
    stored = dict(rows(database, "SELECT seq, hash FROM ledger"))
    report = verify_file(database)
    assert len(acknowledged) >= 300
    assert [stored.get(entry.seq) for entry in acknowledged] == [entry.hash for entry in acknowledged]
    assert (report.ok, report.checked) == (True, len(stored))
