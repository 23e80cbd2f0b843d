"""The act and admin tiers of ``nexo mcp-server``: changes, carried out by the running agent only.

Every call here goes through the daemon's control socket; with no ``nexo run`` it is refused with
the command to run. A goal started here asks for approval where the operator always answers (the
console, an approved channel): no tool here answers an approval, so a client never approves the
requests of the goals it started.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from orchestrator.config.nexo import NexoConfig
from orchestrator.mcpserver.backend import Backend
from orchestrator.mcpserver.models import (
    Cancelled,
    CronChanged,
    CronDeleted,
    Forgotten,
    GoalOutcome,
    Paired,
    Remembered,
    Revoked,
)
from orchestrator.mcpserver.read_tools import AgentArg, GoalIdArg, memory_server
from orchestrator.mcpserver.refusals import as_tool_errors
from orchestrator.mcpserver.send_tools import add_send_tools
from shared.protocol import cron, memory, pairing
from shared.protocol.policy import tool_hints

ORIGIN = "mcp-server"
"""Who did it, as the ledger and pairing records name it."""
CronIdArg = Annotated[str, Field(description="A cron entry id, as cron_list shows it.", min_length=1)]


def outcome_of(answer: dict[str, Any]) -> GoalOutcome:
    return GoalOutcome(
        goal_id=str(answer["goal_id"]),
        agent=str(answer.get("agent", "")),
        status=str(answer.get("outcome", "done")),
        summary=str(answer.get("summary", "")),
        text=answer.get("text"),
        report={k: answer[k] for k in ("turns", "tool_calls", "usage", "error", "axis") if k in answer},
    )


def progress_message(progress: dict[str, Any]) -> str:
    return str(progress.get("last_event") or progress.get("phase") or "running")


def add_act_tools(server: MCPServer[Any], config: NexoConfig, backend: Backend) -> None:
    add_send_tools(server, backend)

    @server.tool(
        title="Run a goal",
        annotations=tool_hints(destructive=True, open_world=True),
    )
    async def goal_run(
        prompt: Annotated[str, Field(description="What the agent should do, in words.", min_length=1)],
        background: Annotated[
            bool, Field(description="Return the goal id at once instead of waiting for the outcome.")
        ] = False,
        agent: AgentArg = None,
        *,
        ctx: Context[Any],
    ) -> GoalOutcome:
        """Hand a goal to the running agent. Without background, wait for its outcome and report each
        step as progress; the agent's tool calls ask the operator for approval as usual."""
        request: dict[str, Any] = {
            "op": "submit" if background else "run",
            "prompt": prompt,
            "source": ORIGIN,
        }
        if agent is not None:
            request["agent"] = agent
        with as_tool_errors():
            if background:
                started = await backend.control_op(request, "running a goal")
                goal_id = str(started["goal_id"])
                return GoalOutcome(
                    goal_id=goal_id,
                    agent=str(started.get("agent", "")),
                    status="started",
                    summary=(
                        f"running in the background; follow it with goal_get or `nexo agent attach {goal_id}`"
                    ),
                )
            steps = 0

            async def on_progress(progress: dict[str, Any]) -> None:
                nonlocal steps
                steps += 1
                await ctx.report_progress(steps, None, progress_message(progress))

            answer = await backend.followed_run({**request, "progress": True}, on_progress)
        return outcome_of(answer)

    @server.tool(title="Cancel a goal", annotations=tool_hints(destructive=True, idempotent=True))
    async def goal_cancel(goal_id: GoalIdArg) -> Cancelled:
        """Stop a goal running in the agent (like `nexo agent cancel`)."""
        with as_tool_errors():
            answer = await backend.control_op(
                {"op": "cancel", "goal": goal_id, "reason": f"{ORIGIN} goal_cancel"}, "cancelling a goal"
            )
        return Cancelled(cancelled=str(answer["cancelled"]))

    @server.tool(title="Remember", annotations=tool_hints())
    async def memory_remember(
        content: Annotated[str, Field(description="The fact or note to keep, in words.", min_length=1)],
        tags: Annotated[list[str], Field(description="Labels to find it by.")] = [],  # noqa: B006
        agent: AgentArg = None,
    ) -> Remembered:
        """Add a memory to the agent's long-term memory, as the operator's own note."""
        agent_id, name = memory_server(config, agent)
        record = memory.ImportRecord(
            agent=agent_id, content=content, tags=tags, kind="note", provenance="owner"
        )
        with as_tool_errors():
            done = await backend.daemon_request(
                name,
                memory.ImportRequest(params=memory.ImportParams(records=[record])),
                memory.ImportResult,
                "remembering",
            )
        if done.rejected:
            raise ToolError(f"not remembered: {done.rejected[0].error}")
        return Remembered(imported=done.imported, refreshed=done.refreshed)

    @server.tool(title="Forget a memory", annotations=tool_hints(destructive=True, idempotent=True))
    async def memory_forget(
        memory_id: Annotated[int, Field(description="The memory's id, as memory_recall shows it.", ge=1)],
        agent: AgentArg = None,
    ) -> Forgotten:
        """Remove one memory from the agent's long-term memory."""
        agent_id, name = memory_server(config, agent)
        with as_tool_errors():
            done = await backend.daemon_request(
                name,
                memory.ForgetRequest(params=memory.ForgetParams(id=memory_id, agent=agent_id)),
                memory.ForgetResult,
                "forgetting",
            )
        return Forgotten(forgotten=done.forgotten)

    async def cron_change(request: cron.PauseRequest | cron.ResumeRequest, what: str) -> CronChanged:
        with as_tool_errors():
            done = await backend.daemon_request(config.cron.server, request, cron.EntryResult, what)
        return CronChanged(entry=done.entry)

    @server.tool(title="Pause a cron entry", annotations=tool_hints(idempotent=True))
    async def cron_pause(id: CronIdArg) -> CronChanged:
        """Stop a schedule from firing until it is resumed."""
        return await cron_change(cron.PauseRequest(params=cron.EntryIdParams(id=id)), "pausing a cron entry")

    @server.tool(title="Resume a cron entry", annotations=tool_hints(idempotent=True))
    async def cron_resume(id: CronIdArg) -> CronChanged:
        """Let a paused schedule fire again from its next slot."""
        return await cron_change(
            cron.ResumeRequest(params=cron.EntryIdParams(id=id)), "resuming a cron entry"
        )

    @server.tool(title="Delete a cron entry", annotations=tool_hints(destructive=True, idempotent=True))
    async def cron_delete(id: CronIdArg) -> CronDeleted:
        """Remove a schedule for good (like `nexo cron drop`)."""
        with as_tool_errors():
            done = await backend.daemon_request(
                config.cron.server,
                cron.DropRequest(params=cron.EntryIdParams(id=id)),
                cron.DropResult,
                "deleting a cron entry",
            )
        if not done.dropped:
            raise ToolError(f"no cron entry {id!r}; list them with cron_list")
        return CronDeleted(deleted=id)


def add_admin_tools(server: MCPServer[Any], config: NexoConfig, backend: Backend) -> None:
    @server.tool(title="Approve a pairing", annotations=tool_hints(idempotent=True))
    async def pairing_approve(
        pending_id: Annotated[
            str, Field(description="The request's id, as pairing_list shows it.", min_length=1)
        ],
    ) -> Paired:
        """Let a sender waiting for approval reach the agent, as a contact."""
        params = pairing.ApproveParams(pending_id=pending_id, by=ORIGIN)
        with as_tool_errors():
            done = await backend.daemon_request(
                config.pairing.server,
                pairing.ApproveRequest(params=params),
                pairing.ApproveResult,
                "approving a pairing",
            )
        return Paired(record=done.record)

    @server.tool(title="Revoke a pairing", annotations=tool_hints(destructive=True, idempotent=True))
    async def pairing_revoke(
        channel: Annotated[
            str, Field(description="The channel server, as pairing_list shows it.", min_length=1)
        ],
        sender: Annotated[str, Field(description="The sender id, as pairing_list shows it.", min_length=1)],
    ) -> Revoked:
        """Stop a paired sender from reaching the agent on that channel."""
        params = pairing.RevokeParams(channel=channel, sender=sender)
        with as_tool_errors():
            done = await backend.daemon_request(
                config.pairing.server,
                pairing.RevokeRequest(params=params),
                pairing.RevokeResult,
                "revoking a pairing",
            )
        return Revoked(revoked=done.revoked)
