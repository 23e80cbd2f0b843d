"""The operator's commands over the control socket: submit, run and cancel goals, forward reads."""

from __future__ import annotations

from typing import Any, Protocol

import anyio
from pydantic import BaseModel

from orchestrator.client_actions import ClientActions
from orchestrator.config.nexo import NexoConfig
from orchestrator.control import Emit
from orchestrator.daemon.status import refused
from orchestrator.dashboard.ops import DASHBOARD_OPS, HasSurfaces, dashboard_command
from orchestrator.dlq import channel_connections, dlq
from orchestrator.goals import AuditSink, GoalTracker, TrackedGoal
from orchestrator.goals.background import Background, UnknownAgent
from orchestrator.mesh import Mesh
from orchestrator.permissions.answers import withdraw_pairing_prompts
from orchestrator.proactive.runtime import Autonomy
from orchestrator.relay import relay, relay_operator, relay_tool

AGENT_OPS = frozenset({"submit", "run", "send", "cron_create"})
"""Control operations that need the agents, which exist only once the servers are up."""
READY_WAIT_S = 4.0
"""How long such an operation waits for a starting daemon: under the CLI's 5 s answer timeout."""
GOAL_SOURCES = ("cli", "mcp-server")
"""Who may be named as a goal's origin over the control socket (the ledger's source of its turns)."""


class Controlled(HasSurfaces, Protocol):
    """The parts of the running daemon the control socket's commands act on."""

    config: NexoConfig
    mesh: Mesh
    ready: anyio.Event
    ready_wait_s: float
    goals: GoalTracker
    background: Background
    autonomy: Autonomy
    sink: AuditSink


def _goal_source(request: dict[str, Any]) -> str:
    source = request.get("source")
    return source if isinstance(source, str) and source in GOAL_SOURCES else "cli"


def _plain(fields: dict[str, object]) -> dict[str, Any]:
    return {k: v.model_dump(mode="json") if isinstance(v, BaseModel) else v for k, v in fields.items()}


async def control_command(daemon: Controlled, request: dict[str, Any], emit: Emit) -> dict[str, Any]:
    op = request.get("op")
    if op in AGENT_OPS and not daemon.ready.is_set():
        with anyio.move_on_after(daemon.ready_wait_s):
            await daemon.ready.wait()
        if not daemon.ready.is_set():
            return {
                "error": "nexo is still starting (its servers are not all up yet); "
                "try again in a moment, or see `nexo status`"
            }
    if op in ("submit", "run"):
        prompt = request.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return {"error": f"{op} needs a non-empty prompt"}
        agent = request.get("agent") or daemon.config.agents[0].id
        try:
            goal = await daemon.background.submit(str(agent), prompt, source=_goal_source(request))
        except UnknownAgent as exc:
            return {"error": str(exc)}
        if op == "run":
            if request.get("progress") is True:
                return await _followed(daemon.goals, goal, emit)
            return await _outcome(daemon.goals, goal)
        return {"goal_id": goal.id, "agent": goal.agent}
    if op == "cancel":
        goal_id = str(request.get("goal", ""))
        if daemon.goals.cancel(
            goal_id, f"cancelled by the operator ({request.get('reason') or 'nexo agent cancel'})"
        ):
            return {"cancelled": goal_id}
        return {"error": f"no live goal {goal_id!r} in this process; see `nexo agent ps`"}
    if op == "dlq":
        return await dlq(channel_connections(daemon.mesh.connections), request)
    if op == "autonomy":
        action = request.get("action", "status")
        by = str(request.get("by") or "cli")
        if action == "pause":
            daemon.autonomy.pause(by)
        elif action == "resume":
            daemon.autonomy.resume(by)
        elif action != "status":
            return {"error": f"unknown autonomy action {action!r}; expected status, pause or resume"}
        return {"autonomy": daemon.autonomy.status()}
    if op == "channels":
        return {"servers": {c.name: c.describe_live() for c in daemon.mesh.connections.values()}}
    if op == "refused":
        return {"refused": refused(daemon.intakes)}
    if op == "request":
        answer = await relay(daemon.mesh, request)
        withdraw_pairing_prompts([intake.broker for intake in daemon.intakes], request, answer)
        return answer
    if op == "operator":
        answer = await relay_operator(daemon.mesh, daemon.config, request)
        withdraw_pairing_prompts([intake.broker for intake in daemon.intakes], request, answer)
        return answer
    if op == "tool":
        return await relay_tool(daemon.mesh, request)
    if op in ("send", "cron_create"):
        actions = ClientActions(daemon.mesh, daemon.background.intakes, daemon.sink)
        return await (actions.send(request) if op == "send" else actions.cron_create(request))
    if op in DASHBOARD_OPS:
        return dashboard_command(daemon, request)
    return {
        "error": f"unknown op {op!r}; expected submit, run, cancel, channels, refused, autonomy, dlq, "
        "request, operator, tool, send, cron_create, dashboard_login, approvals or approve"
    }


async def _followed(goals: GoalTracker, goal: TrackedGoal, emit: Emit) -> dict[str, Any]:
    """``run`` with ``progress``: a line when the goal starts and at each noted step, then its
    outcome. Steps noted faster than they are sent are coalesced (the latest wins), and the last
    step is always sent before the outcome."""
    sent: dict[str, Any] = {}

    async def send_latest() -> None:
        latest = {"goal_id": goal.id, **_plain(goal.progress)}
        if latest != sent:
            sent.clear()
            sent.update(latest)
            await emit(latest)

    async with anyio.create_task_group() as tg:

        async def follow() -> None:
            await emit({"goal_id": goal.id, "agent": goal.agent, "phase": "started"})
            while True:
                progressed = goal.progressed
                await progressed.wait()
                await send_latest()

        tg.start_soon(follow)
        outcome = await _outcome(goals, goal)
        tg.cancel_scope.cancel()
    if goal.progress:
        await send_latest()
    return outcome


async def _outcome(goals: GoalTracker, goal: TrackedGoal) -> dict[str, Any]:
    """``nexo agent run`` with the daemon up: answer with the goal's outcome once it ends. The
    control socket cancels this wait when the command goes away (Ctrl-C), and the goal with it."""
    try:
        await goal.finished.wait()
    finally:
        if not goal.finished.is_set():
            goals.cancel(goal.id, "cancelled: `nexo agent run` was interrupted")
    if goal.result is None:
        reason = goal.cancel_reason or "it ended without an outcome"
        return {"goal_id": goal.id, "error": f"goal {goal.id}: {reason}; see `nexo agent attach {goal.id}`"}
    return {"goal_id": goal.id, "agent": goal.agent, "summary": goal.result.summary(), **goal.result.report()}
