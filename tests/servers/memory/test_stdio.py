"""``python -m servers.memory`` as a real process: stdio serving and its refusals at startup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from servers.memory.reindex import check_model
from servers.memory.settings import MemorySettings
from servers.memory.state import open_database
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorIndex
from shared.protocol.memory.meta import tool_meta
from shared.protocol.memory.sessions import SessionResolveParams, SessionResolveRequest, SessionResolveResult

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60


def server_env(state: Path, **extra: str) -> dict[str, str]:
    # Coverage follows the child through its COVERAGE_* variables; nothing else leaks in.
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_MEMORY_STATE_DIR": str(state), **extra})
    return env


def run_server(state: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servers.memory"],
        env={**os.environ, **server_env(state, **extra)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        cwd=REPO,
        check=False,
    )


@pytest.mark.anyio
async def test_the_server_serves_tools_and_control_methods_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "servers.memory"], env=server_env(tmp_path), cwd=str(REPO)
    )
    with anyio.fail_after(START_TIMEOUT_S):
        async with Client(params) as client:
            meta = tool_meta("nexo", "owner")
            stored = await client.call_tool(
                "memory_remember", {"content": "Ana prefers green tea"}, meta=meta
            )
            recalled = await client.call_tool("memory_recall", {"query": "what does Ana drink"}, meta=meta)
            session = await client.session.send_request(
                SessionResolveRequest(params=SessionResolveParams(agent="nexo", session_key="k")),
                SessionResolveResult,
            )
    assert stored.structured_content == {"id": 1, "status": "stored"}
    assert recalled.structured_content is not None
    assert [m["content"] for m in recalled.structured_content["memories"]] == ["Ana prefers green tea"]
    assert (session.session_id, session.created) == (1, True)
    assert (tmp_path / "memory" / "memory.db").exists()


def test_bad_settings_stop_the_server_with_one_clear_line_and_exit_status_1(tmp_path: Path) -> None:
    done = run_server(tmp_path, NEXO_MEMORY_GUARD_MODE="loud")
    assert done.returncode == 1
    assert done.stderr.startswith("servers.memory: 1 validation error for MemorySettings\nguard_mode\n")
    assert "Traceback" not in done.stderr


def test_a_changed_embedding_model_stops_the_server_and_names_the_fix(tmp_path: Path) -> None:
    settings = MemorySettings(state_dir=tmp_path)

    async def record_other_model() -> None:
        async with open_database(settings) as db:
            await check_model(MemoryStore(db, VectorIndex(db, 8)), "old-model", 8, allow_mismatch=False)

    anyio.run(record_other_model)
    done = run_server(tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "servers.memory: the memory database was indexed with embedding model 'old-model' (8 dims) but the "
        "configured model is "
    )
    assert "Fix: run `nexo memory reindex`" in done.stderr
    assert "Traceback" not in done.stderr
