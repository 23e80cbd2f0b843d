"""``nexo mcp-server``: nexo itself as one MCP server, its catalog chosen by tier.

``read`` (the default) looks things up; ``act`` adds what changes something through the running
agent; ``admin`` adds pairing approvals and revocations. The resources are each agent's MEMORY.md and
each goal's snapshot.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server import MCPServer

from orchestrator.config.nexo import NexoConfig
from orchestrator.mcpserver.act_tools import add_act_tools, add_admin_tools
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.models import Tier
from orchestrator.mcpserver.read_tools import add_read_tools, goal_snapshot, memory_file
from orchestrator.mcpserver.resource_watch import ResourceWatch
from shared.hosting.capabilities import serve_resource_subscriptions
from shared.serverkit import nexo_version

INSTRUCTIONS = {
    "read": (
        "The nexo personal agent, read-only: recall its memories and MEMORY.md, list and inspect its goals "
        "and their turns, search and verify its audit ledger, list cron entries, channels and pairings."
    ),
    "act": (
        " You may also run and cancel goals, remember and forget, send messages on the agent's channels "
        "(to the operator, paired contacts or allowed chats), and create, pause, resume or delete cron "
        "entries; approvals the agent asks for go to its operator, not to you."
    ),
    "admin": " You may also approve and revoke pairings.",
}


def build_server(config: NexoConfig, backend: Backend, tier: Tier = "read") -> MCPServer[Any]:
    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        async with backend.opened(), anyio.create_task_group() as watching:
            backend.on_change = watch.changed
            watching.start_soon(watch.run, name="resource-watch")
            try:
                yield
            finally:
                watching.cancel_scope.cancel()

    tiers = ("read", "act", "admin")[: ("read", "act", "admin").index(tier) + 1]
    server: MCPServer[Any] = MCPServer(
        "nexo",
        instructions="".join(INSTRUCTIONS[t] for t in tiers),
        version=nexo_version(),
        lifespan=lifespan,
        log_level="WARNING",
        subscriptions=False,
    )
    add_read_tools(server, config, backend)
    if "act" in tiers:
        add_act_tools(server, config, backend)
    if "admin" in tiers:
        add_admin_tools(server, config, backend)
    _add_resources(server, config, backend)
    watch = ResourceWatch(config, backend, server.list_resources)
    serve_resource_subscriptions(
        server, on_list=watch.on_list, on_subscribe=watch.on_subscribe, on_unsubscribe=watch.on_unsubscribe
    )
    return server


def _add_resources(server: MCPServer[Any], config: NexoConfig, backend: Backend) -> None:
    for agent in config.agents:
        _add_memory_file(server, config, backend, agent.id)

    @server.resource(
        "nexo://goals/{goal_id}",
        name="goal",
        title="A goal's snapshot",
        description="Status, phase, times, budget used and outcome of one goal, as JSON.",
        mime_type="application/json",
    )
    async def goal_resource(goal_id: str) -> str:
        goal = await goal_snapshot(config, backend, goal_id)
        return json.dumps(goal.model_dump(mode="json"), indent=2)


def _add_memory_file(server: MCPServer[Any], config: NexoConfig, backend: Backend, agent: str) -> None:
    @server.resource(
        f"nexo://agents/{agent}/MEMORY.md",
        name=f"{agent}-memory",
        title=f"MEMORY.md of {agent}",
        description=f"What agent {agent} chose to remember, as it is now.",
        mime_type="text/markdown",
    )
    async def memory_resource() -> str:
        return (await memory_file(config, backend, agent)).content
