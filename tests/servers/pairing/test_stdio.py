"""The pairing server as a real process: ``python -m servers.pairing`` over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from shared.protocol.pairing import (
    ApproveParams,
    ApproveRequest,
    ApproveResult,
    CheckRequest,
    CheckResult,
)
from tests.mesh.harness import REPO
from tests.servers.pairing.conftest import dm

pytestmark = pytest.mark.anyio


def server_params(state_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_PAIRING_STATE_DIR": str(state_dir), "NEXO_LOG_LEVEL": "WARNING"})
    return StdioServerParameters(
        command=sys.executable, args=["-m", "servers.pairing"], env=env, cwd=str(REPO)
    )


async def test_the_server_runs_over_stdio_with_only_its_control_plane(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Client(server_params(tmp_path)) as client:
            tools = (await client.list_tools()).tools
            challenge = await client.session.send_request(CheckRequest(params=dm("111")), CheckResult)
            approved = await client.session.send_request(
                ApproveRequest(params=ApproveParams(code=challenge.code, by="cli")), ApproveResult
            )
            allowed = await client.session.send_request(CheckRequest(params=dm("111")), CheckResult)
    assert tools == []
    assert (challenge.verdict, approved.record.sender, allowed.verdict) == ("challenge", "111", "allow")
    assert (tmp_path / "pairing" / "pairing.db").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "pairing" / "code.key").stat().st_mode & 0o777 == 0o600


async def test_a_bad_setting_is_reported_and_the_process_exits_1(tmp_path: Path) -> None:
    params = server_params(tmp_path)
    env = {**(params.env or {}), "NEXO_PAIRING_MAX_PENDING": "0", "PATH": os.environ.get("PATH", "")}
    with anyio.fail_after(60):
        process = await anyio.run_process(
            [sys.executable, "-m", "servers.pairing"], env=env, cwd=REPO, check=False
        )
    assert process.returncode == 1
    assert process.stderr.decode().startswith(
        "servers.pairing: 1 validation error for PairingSettings\nmax_pending"
    )
    assert not (tmp_path / "pairing").exists()
