"""The audit control plane: custom JSON-RPC request methods served through an MCP extension.

These are how the orchestrator and the CLI write and read the ledger and the goal registry. They
are not tools, so no model (ours or another MCP client's) ever sees them in a tool list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError

from servers.audit.errors import GoalNotFound, InvalidRequest, TransitionRefused, WriterStopped
from servers.audit.state import AuditState
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    GoalBootParams,
    GoalBootRequest,
    GoalBootResult,
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
    GoalGetParams,
    GoalGetRequest,
    GoalGetResult,
    GoalListParams,
    GoalListRequest,
    GoalListResult,
    GoalMarkNotifiedParams,
    GoalMarkNotifiedRequest,
    GoalMarkNotifiedResult,
    GoalUpdateParams,
    GoalUpdateRequest,
    GoalUpdateResult,
    HeadParams,
    HeadRequest,
    HeadResult,
    TailParams,
    TailRequest,
    TailResult,
    TrimParams,
    TrimRequest,
    TrimResult,
    VerifyParams,
    VerifyRequest,
    VerifyResult,
)
from shared.protocol.audit.terms import AUDIT_EXTENSION, GOAL_NOT_FOUND, MAX_APPEND, TRANSITION_REFUSED
from shared.protocol.control import Route, bind_routes, method_names


async def _append(state: AuditState, params: AppendParams) -> AppendResult:
    return AppendResult(entries=await state.committer.append(params.entries))


async def _verify(state: AuditState, params: VerifyParams) -> VerifyResult:
    return VerifyResult(report=await state.ledger.verify(params.expected_head))


async def _head(state: AuditState, _: HeadParams) -> HeadResult:
    return HeadResult(head=await state.ledger.head())


async def _tail(state: AuditState, params: TailParams) -> TailResult:
    entries = await state.ledger.tail(
        goal_id=params.goal_id,
        source=params.source,
        kind=params.kind,
        kinds=params.kinds,
        since_seq=params.since_seq,
        since_at=params.since_at,
        limit=params.limit,
    )
    return TailResult(entries=entries)


async def _trim(state: AuditState, params: TrimParams) -> TrimResult:
    outcome = await state.retention.trim(turns_per_goal=params.turns_per_goal, max_age_s=params.max_age_s)
    return TrimResult(removed=outcome.removed, checkpoint=outcome.checkpoint)


async def _create(state: AuditState, params: GoalCreateParams) -> GoalCreateResult:
    goal, created = await state.goals.create(
        agent=params.agent,
        kind=params.kind,
        origin=params.origin,
        prompt=params.prompt,
        phase=params.phase,
        goal_id=params.id,
        source=params.source,
    )
    return GoalCreateResult(goal=goal, created=created)


async def _update(state: AuditState, params: GoalUpdateParams) -> GoalUpdateResult:
    goal, promoted = await state.goals.update(
        params.id,
        status=params.status,
        phase=params.phase,
        last_decision=params.last_decision,
        last_event=params.last_event,
        budget=params.budget,
        outcome=params.outcome,
        reason=params.reason,
        source=params.source,
    )
    return GoalUpdateResult(goal=goal, promoted=promoted)


async def _get(state: AuditState, params: GoalGetParams) -> GoalGetResult:
    return GoalGetResult(goal=await state.goals.get(params.id))


async def _list(state: AuditState, params: GoalListParams) -> GoalListResult:
    goals = await state.goals.find(
        active_only=params.active_only, kind=params.kind, agent=params.agent, limit=params.limit
    )
    return GoalListResult(
        goals=goals, running=await state.goals.running(), max_running=state.goals.max_running
    )


async def _boot(state: AuditState, params: GoalBootParams) -> GoalBootResult:
    lost, resumable, promoted = await state.goals.boot(params.resumable_kinds)
    return GoalBootResult(lost=lost, resumable=resumable, promoted=promoted)


async def _mark_notified(state: AuditState, params: GoalMarkNotifiedParams) -> GoalMarkNotifiedResult:
    return GoalMarkNotifiedResult(marked=await state.goals.mark_notified(params.ids))


ROUTES: tuple[Route, ...] = (
    (AppendRequest, AppendParams, _append),
    (VerifyRequest, VerifyParams, _verify),
    (HeadRequest, HeadParams, _head),
    (TailRequest, TailParams, _tail),
    (TrimRequest, TrimParams, _trim),
    (GoalCreateRequest, GoalCreateParams, _create),
    (GoalUpdateRequest, GoalUpdateParams, _update),
    (GoalGetRequest, GoalGetParams, _get),
    (GoalListRequest, GoalListParams, _list),
    (GoalBootRequest, GoalBootParams, _boot),
    (GoalMarkNotifiedRequest, GoalMarkNotifiedParams, _mark_notified),
)
METHODS: tuple[str, ...] = method_names(ROUTES)


def as_mcp_error(exc: Exception) -> MCPError | None:
    """The JSON-RPC error for what the stores refuse; None for anything else (an internal error)."""
    if isinstance(exc, InvalidRequest):
        return MCPError(types.INVALID_PARAMS, str(exc))
    if isinstance(exc, GoalNotFound):
        return MCPError(GOAL_NOT_FOUND, str(exc))
    if isinstance(exc, TransitionRefused):
        return MCPError(TRANSITION_REFUSED, str(exc))
    if isinstance(exc, WriterStopped):
        return MCPError(types.INTERNAL_ERROR, str(exc))
    return None


class AuditExtension(Extension):
    """Serves every ``nexo/audit/...`` method for a server whose lifespan state is an AuditState."""

    identifier = AUDIT_EXTENSION

    def settings(self) -> dict[str, Any]:
        return {"methods": list(METHODS), "max_append": MAX_APPEND}

    def methods(self) -> Sequence[MethodBinding]:
        return bind_routes(ROUTES, as_mcp_error)
