"""The cron server as a real process: ``python -m servers.cron`` over stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from shared.protocol.cron import (
    FireOutcomeParams,
    FireOutcomeRequest,
    FireOutcomeResult,
    FireParams,
    FirePayload,
    FireRequest,
    FireResult,
    tool_meta,
)
from shared.protocol.events import AckParams, AckRequest, AckResult, PullParams, PullRequest, PullResult
from tests.mesh.harness import REPO

pytestmark = pytest.mark.anyio


def server_params(state_dir: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}
    env.update({"NEXO_CRON_STATE_DIR": str(state_dir), "NEXO_LOG_LEVEL": "WARNING"})
    return StdioServerParameters(command=sys.executable, args=["-m", "servers.cron"], env=env, cwd=str(REPO))


async def test_a_manual_fire_goes_out_as_an_event_and_its_outcome_comes_back(tmp_path: Path) -> None:
    meta = tool_meta("home", "nexo", "anthropic/claude-sonnet-4-5")
    with anyio.fail_after(60):
        async with Client(server_params(tmp_path)) as client:
            tools = sorted(tool.name for tool in (await client.list_tools()).tools)
            created = await client.call_tool(
                "cron_create", {"schedule": "every 1h", "prompt": "tidy up"}, meta=meta
            )
            assert created.structured_content is not None
            entry_id = created.structured_content["id"]
            fired = await client.session.send_request(FireRequest(params=FireParams(id=entry_id)), FireResult)
            pulled = await client.session.send_request(
                PullRequest(params=PullParams(wait_ms=5_000, kinds=["cron_fire"])), PullResult
            )
            [event] = pulled.events
            acked = await client.session.send_request(
                AckRequest(params=AckParams(seqs=[event.seq])), AckResult
            )
            payload = FirePayload.model_validate(event.payload)
            reported = await client.session.send_request(
                FireOutcomeRequest(
                    params=FireOutcomeParams(fire_id=payload.fire_id, outcome="done", attempt=1)
                ),
                FireOutcomeResult,
            )
    assert tools == ["cron_create", "cron_delete", "cron_list", "cron_pause", "cron_resume", "reminder"]
    assert (payload.entry_id, payload.text, payload.manual, payload.provider) == (
        entry_id,
        "tidy up",
        True,
        "anthropic",
    )
    assert payload.fire_id == fired.fire.id
    assert acked.acked == 1
    assert (reported.fire.status, reported.entry.state, reported.entry.last_fire) == (
        "done",
        "active",
        "done",
    )
    assert (tmp_path / "cron" / "cron.db").stat().st_mode & 0o777 == 0o600
