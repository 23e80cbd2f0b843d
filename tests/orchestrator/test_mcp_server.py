"""``nexo mcp-server`` in memory: the tiered catalog, and what it does with no daemon running."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from orchestrator.config.loading import load
from orchestrator.config.nexo import NexoConfig
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.server import build_server
from orchestrator.sockets import control_path
from tests.orchestrator.mcp_server_tiers import ACT_TOOLS, ADMIN_TOOLS, READ_TOOLS

pytestmark = pytest.mark.anyio
WAIT_S = 60.0


def _config(tmp_path: Path) -> NexoConfig:
    path = tmp_path / "agents.yaml"
    python = sys.executable
    path.write_text(
        f"""
state_dir: {tmp_path / "state"}
fork_server: false
servers:
  audit: {{transport: stdio, command: {python}, args: [-m, servers.audit]}}
  console: {{transport: stdio, command: {python}, args: [-m, channel_servers.console]}}
llm:
  providers:
    fake: {{kind: openai_compat, base_url: "http://127.0.0.1:9/v1", model: scripted}}
agents:
  - id: nexo
    model: {{provider: fake}}
    channels: [console]
"""
    )
    return load(path)


def _server(config: NexoConfig, tier: str = "read") -> object:
    return build_server(config, Backend(config, control_path(config.state_path)), tier)  # type: ignore[arg-type]


async def test_the_read_tier_offers_only_read_only_idempotent_closed_world_tools_each_with_an_output_schema(
    tmp_path: Path,
) -> None:
    async with Client(_server(_config(tmp_path))) as client:  # type: ignore[arg-type]
        tools = (await client.list_tools()).tools
    assert {tool.name for tool in tools} == READ_TOOLS
    for tool in tools:
        hints = tool.annotations
        assert hints is not None, tool.name
        assert (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ) == (
            True,
            False,
            True,
            False,
        ), tool.name
        assert (tool.output_schema or {}).get("type") == "object", tool.name


async def test_act_adds_the_changing_tools_and_admin_the_pairing_ones_none_of_them_read_only(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    async with Client(_server(config, "act")) as act, Client(_server(config, "admin")) as admin:  # type: ignore[arg-type]
        act_tools = {tool.name: tool for tool in (await act.list_tools()).tools}
        admin_tools = {tool.name: tool for tool in (await admin.list_tools()).tools}
    assert set(act_tools) == READ_TOOLS | ACT_TOOLS
    assert set(admin_tools) == READ_TOOLS | ACT_TOOLS | ADMIN_TOOLS
    changing = {name: tool for name, tool in admin_tools.items() if name not in READ_TOOLS}
    for name, tool in changing.items():
        assert tool.annotations is not None, name
        assert tool.annotations.read_only_hint is False, name
        assert tool.output_schema is not None, name
    destructive = {
        name for name, tool in changing.items() if tool.annotations and tool.annotations.destructive_hint
    }
    assert destructive == {"goal_run", "goal_cancel", "memory_forget", "cron_delete", "pairing_revoke"}
    assert {n for n, t in changing.items() if t.annotations and t.annotations.open_world_hint} == {
        "goal_run",
        "channel_send",
        "cron_create",
    }


async def test_without_a_daemon_reads_start_their_server_and_act_calls_name_nexo_run(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with anyio.fail_after(WAIT_S):
        async with Client(_server(config, "act")) as client:  # type: ignore[arg-type]
            listed = await client.call_tool("goals_list", {"include_finished": True})
            verified = await client.call_tool("audit_verify", {})
            channels = await client.call_tool("channels_status", {})
            run = await client.call_tool("goal_run", {"prompt": "say hi"})
            cancel = await client.call_tool("goal_cancel", {"goal_id": "g-1"})
            send = await client.call_tool(
                "channel_send", {"server": "console", "chat_id": "op", "text": "hi"}
            )
            schedule = await client.call_tool("cron_create", {"schedule": "every 2h", "prompt": "check"})
    assert listed.is_error is False
    assert listed.structured_content == {
        "goals": [],
        "running": 0,
        "max_running": listed.structured_content["max_running"],
    }
    assert verified.structured_content is not None
    assert verified.structured_content["report"]["ok"] is True
    assert channels.structured_content == {
        "daemon_running": False,
        "channels": [{"name": "console", "state": "not running", "detail": {}}],
    }
    for refused, what in (
        (run, "running a goal"),
        (cancel, "cancelling a goal"),
        (send, "sending a message"),
        (schedule, "scheduling a prompt"),
    ):
        assert refused.is_error is True
        text = refused.content[0].text  # type: ignore[union-attr]
        assert text.endswith(
            f"{what}: this needs the running agent, and none is running for this config: start it with "
            "`nexo run` (same --config), then call again"
        ), text


async def test_an_unknown_agent_is_refused_with_the_agents_to_choose_from(tmp_path: Path) -> None:
    async with Client(_server(_config(tmp_path))) as client:  # type: ignore[arg-type]
        result = await client.call_tool("memory_recall", {"query": "x", "agent": "other"})
    assert result.is_error is True
    assert result.content[0].text.endswith("no agent 'other' in the config; use one of nexo")  # type: ignore[union-attr]


async def test_the_control_socket_forwards_only_the_listed_requests_and_tools() -> None:
    from orchestrator.mesh import Mesh, SupervisionConfig
    from orchestrator.relay import relay, relay_tool

    mesh = Mesh({}, SupervisionConfig())
    appended = await relay(mesh, {"op": "request", "server": "audit", "method": "nexo/audit/append"})
    unknown = await relay(mesh, {"op": "request", "server": "nosuch", "method": "nexo/audit/goals/list"})
    tool = await relay_tool(mesh, {"op": "tool", "server": "workspace", "tool": "shell", "arguments": {}})
    assert appended["error"].startswith(
        "the control socket does not forward 'nexo/audit/append'; it forwards "
    )
    assert unknown == {"error": "the running mesh has no server 'nosuch'; see `nexo status`"}
    assert tool == {"error": "the control socket does not forward the tool 'shell'"}
