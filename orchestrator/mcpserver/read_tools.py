"""The read tier of ``nexo mcp-server``: looking things up, changing nothing."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from orchestrator.config.nexo import NexoConfig
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.models import (
    Channels,
    ChannelState,
    CronEntries,
    GoalList,
    LedgerEntries,
    MemoryFile,
    Pairings,
    Recalled,
    SearchHits,
    Verified,
)
from orchestrator.mcpserver.refusals import as_tool_errors
from shared.protocol import cron, memory, pairing
from shared.protocol.audit import methods as audit_methods
from shared.protocol.audit.goals import Goal
from shared.protocol.policy import READ_ONLY_HINTS

AgentArg = Annotated[str | None, Field(description="Agent id; omit for the first agent of the config.")]
GoalIdArg = Annotated[
    str, Field(description="A goal id, as goals_list shows it.", min_length=1, max_length=64)
]


def memory_server(config: NexoConfig, agent: str | None) -> tuple[str, str]:
    """(agent id, its memory server); a ToolError naming the agents for an unknown id."""
    known = [a.id for a in config.agents]
    chosen = next((a for a in config.agents if agent is None or a.id == agent), None)
    if chosen is None:
        raise ToolError(f"no agent {agent!r} in the config; use one of {', '.join(known)}")
    return chosen.id, chosen.memory.server


async def memory_file(config: NexoConfig, backend: Backend, agent: str | None) -> MemoryFile:
    agent_id, server = memory_server(config, agent)
    with as_tool_errors():
        history = await backend.request(
            server,
            memory.HistoryRequest(params=memory.HistoryParams(agent=agent_id, limit=10)),
            memory.HistoryResult,
        )
    return MemoryFile(agent=agent_id, content=history.content, revisions=history.revisions)


async def goal_snapshot(config: NexoConfig, backend: Backend, goal_id: str) -> Goal:
    with as_tool_errors():
        got = await backend.request(
            config.audit.server,
            audit_methods.GoalGetRequest(params=audit_methods.GoalGetParams(id=goal_id)),
            audit_methods.GoalGetResult,
        )
    return got.goal


def add_read_tools(server: MCPServer[Any], config: NexoConfig, backend: Backend) -> None:
    @server.tool(title="Recall memories", annotations=READ_ONLY_HINTS)
    async def memory_recall(
        query: Annotated[str, Field(description="What to look for, in words.", min_length=1)],
        limit: Annotated[int, Field(description="The most memories to return.", ge=1, le=50)] = 8,
        agent: AgentArg = None,
    ) -> Recalled:
        """Search the agent's long-term memories by meaning and keywords, best match first."""
        agent_id, name = memory_server(config, agent)
        with as_tool_errors():
            found = await backend.request(
                name,
                memory.SearchRequest(params=memory.SearchParams(query=query, agent=agent_id, limit=limit)),
                memory.SearchResult,
            )
        return Recalled(memories=found.memories, mode=found.mode)

    @server.tool(name="memory_file", title="Read MEMORY.md", annotations=READ_ONLY_HINTS)
    async def read_memory_file(agent: AgentArg = None) -> MemoryFile:
        """The agent's MEMORY.md as it is now, with its latest revisions (newest first)."""
        return await memory_file(config, backend, agent)

    @server.tool(title="List goals", annotations=READ_ONLY_HINTS)
    async def goals_list(
        include_finished: Annotated[bool, Field(description="Also finished goals (the newest 200).")] = False,
        background_only: Annotated[
            bool, Field(description="Only background goals (bg, daemon, daemon_worker), as discover shows.")
        ] = False,
    ) -> GoalList:
        """Goals that are running, sleeping, queued or paused (like `nexo agent ps`)."""
        params = audit_methods.GoalListParams(active_only=not include_finished)
        with as_tool_errors():
            listed = await backend.request(
                config.audit.server,
                audit_methods.GoalListRequest(params=params),
                audit_methods.GoalListResult,
            )
        goals = [g for g in listed.goals if not background_only or g.kind != "interactive"]
        return GoalList(goals=goals, running=listed.running, max_running=listed.max_running)

    @server.tool(title="One goal", annotations=READ_ONLY_HINTS)
    async def goal_get(goal_id: GoalIdArg) -> Goal:
        """One goal's snapshot: status, phase, times, budget used, outcome (like `nexo agent attach`)."""
        return await goal_snapshot(config, backend, goal_id)

    @server.tool(title="Latest turns of a goal", annotations=READ_ONLY_HINTS)
    async def goal_turns(
        goal_id: GoalIdArg,
        n: Annotated[int, Field(description="How many of the latest turns.", ge=1, le=200)] = 20,
    ) -> LedgerEntries:
        """The turn log of a goal from the audit ledger, oldest first."""
        params = audit_methods.TailParams(goal_id=goal_id, kind="turn", limit=n)
        with as_tool_errors():
            tail = await backend.request(
                config.audit.server, audit_methods.TailRequest(params=params), audit_methods.TailResult
            )
        return LedgerEntries(entries=tail.entries)

    @server.tool(title="Search the audit ledger", annotations=READ_ONLY_HINTS)
    async def audit_search(
        query: Annotated[str, Field(description="Words that must all occur in an entry.", min_length=1)],
        kind: Annotated[
            str | None, Field(description="Only this entry kind, e.g. turn or tool_call.")
        ] = None,
        goal_id: Annotated[str | None, Field(description="Only this goal's entries.")] = None,
        limit: Annotated[int, Field(description="The most entries.", ge=1, le=100)] = 20,
    ) -> SearchHits:
        """Ledger entries whose subject or body holds every word of query, newest first."""
        arguments: dict[str, Any] = {"query": query, "limit": limit}
        if kind is not None:
            arguments["kind"] = kind
        if goal_id is not None:
            arguments["goal_id"] = goal_id
        with as_tool_errors():
            found = await backend.tool(config.audit.server, "audit_search", arguments)
        return SearchHits(hits=list(found.get("hits", [])))

    @server.tool(title="Verify the audit ledger", annotations=READ_ONLY_HINTS)
    async def audit_verify() -> Verified:
        """Check the ledger's hash chain end to end (like `nexo audit verify`)."""
        with as_tool_errors():
            checked = await backend.request(
                config.audit.server,
                audit_methods.VerifyRequest(params=audit_methods.VerifyParams()),
                audit_methods.VerifyResult,
            )
        return Verified(report=checked.report)

    @server.tool(title="List cron entries", annotations=READ_ONLY_HINTS)
    async def cron_list(
        include_finished: Annotated[bool, Field(description="Also finished one-shot entries.")] = False,
    ) -> CronEntries:
        """Every schedule: id, binding, state, schedule, next due (like `nexo cron list`)."""
        params = cron.ListParams(include_finished=include_finished)
        with as_tool_errors():
            listed = await backend.request(
                config.cron.server, cron.ListRequest(params=params), cron.ListResult
            )
        return CronEntries(entries=listed.entries)

    @server.tool(title="Channels and their state", annotations=READ_ONLY_HINTS)
    async def channels_status() -> Channels:
        """Each channel server the agents are bound to, and its state in the running agent."""
        bound = sorted({name for agent in config.agents for name in agent.channels})
        if not await backend.daemon_running():
            return Channels(
                daemon_running=False, channels=[ChannelState(name=n, state="not running") for n in bound]
            )
        with as_tool_errors():
            live = await backend.control_op({"op": "channels"}, "channel status")
        servers: dict[str, Any] = live.get("servers", {})
        return Channels(daemon_running=True, channels=[_live_state(n, servers.get(n)) for n in bound])

    @server.tool(title="Paired senders", annotations=READ_ONLY_HINTS)
    async def pairing_list(
        channel: Annotated[str | None, Field(description="Only this channel server.")] = None,
    ) -> Pairings:
        """Who may reach the agent on each channel, and the requests waiting for approval."""
        with as_tool_errors():
            listed = await backend.request(
                config.pairing.server,
                pairing.ListRequest(params=pairing.ListParams(channel=channel)),
                pairing.ListResult,
            )
        return Pairings(records=listed.records, pending=listed.pending)


def _live_state(name: str, described: dict[str, Any] | None) -> ChannelState:
    if described is None:
        return ChannelState(name=name, state="not in the running mesh")
    error = described.get("error")
    return ChannelState(
        name=name, state="ready" if error is None else f"unavailable: {error}", detail=described
    )
