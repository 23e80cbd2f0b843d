"""The control-plane requests the control socket forwards to a server of the running mesh.

``nexo mcp-server`` reads goals, the ledger, cron entries, pairings and memories through the
daemon when one runs, so it shares the daemon's server processes instead of starting its own copies
(a second memory server would load a second embedding model). Only the methods named here are
forwarded: the socket is the operator's, but a request it does not know is refused, not guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from pydantic import ValidationError

from orchestrator.mesh import Mesh, ServerUnavailable
from shared.protocol import cron, cron_terms, memory, memory_terms, pairing
from shared.protocol.audit import methods as audit_methods
from shared.protocol.audit.terms import TAIL_METHOD
from shared.protocol.goal_terms import GOAL_GET_METHOD, GOAL_LIST_METHOD

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig

RELAY_TIMEOUT_S = 30.0

RELAYED: dict[str, tuple[type[types.Request[Any, Any]], type[types.Result]]] = {
    request.model_fields["method"].default: (request, result)
    for request, result in (
        (audit_methods.GoalListRequest, audit_methods.GoalListResult),
        (audit_methods.GoalGetRequest, audit_methods.GoalGetResult),
        (audit_methods.VerifyRequest, audit_methods.VerifyResult),
        (audit_methods.TailRequest, audit_methods.TailResult),
        (cron.ListRequest, cron.ListResult),
        (cron.PauseRequest, cron.EntryResult),
        (cron.ResumeRequest, cron.EntryResult),
        (cron.DropRequest, cron.DropResult),
        (memory.SearchRequest, memory.SearchResult),
        (memory.ListRequest, memory.ListResult),
        (memory.HistoryRequest, memory.HistoryResult),
        (memory.RollbackRequest, memory.RollbackResult),
        (memory.ImportRequest, memory.ImportResult),
        (memory.ForgetRequest, memory.ForgetResult),
        (memory.StatsRequest, memory.StatsResult),
        (memory.MetricsRequest, memory.MetricsResult),
        (pairing.ListRequest, pairing.ListResult),
        (pairing.ApproveRequest, pairing.ApproveResult),
        (pairing.DenyRequest, pairing.DenyResult),
        (pairing.RevokeRequest, pairing.RevokeResult),
        (pairing.SeedRequest, pairing.SeedResult),
    )
}
"""Method name -> (request model, result model)."""


async def relay(mesh: Mesh, request: dict[str, Any], *, by_alias: bool = True) -> dict[str, Any]:
    """``{"op": "request", "server": NAME, "method": M, "params": {...}}`` answered with the server's
    result as JSON (its wire names, or with ``by_alias=False`` the models' field names), or
    ``{"error": ..., "code": ...}`` naming what went wrong."""
    server, method = request.get("server"), request.get("method")
    models = RELAYED.get(str(method))
    if models is None:
        return {"error": f"the control socket does not forward {method!r}; it forwards {', '.join(RELAYED)}"}
    if not isinstance(server, str) or server not in mesh.connections:
        return {"error": f"the running mesh has no server {server!r}; see `nexo status`"}
    request_model, result_model = models
    try:
        outgoing = request_model.model_validate({"method": method, "params": request.get("params") or {}})
    except ValidationError as exc:
        return {"error": f"invalid params for {method}: {exc.errors(include_url=False)}"}
    try:
        result = await mesh[server].request(outgoing, result_model, timeout=RELAY_TIMEOUT_S)
    except MCPError as exc:
        return {"error": exc.message, "code": exc.code}
    except ServerUnavailable as exc:
        return {"error": str(exc)}
    return {
        "result": result.model_dump(
            mode="json",
            by_alias=by_alias,
        )
    }


OPERATOR_METHODS: dict[str, Callable[[NexoConfig], str]] = {
    **dict.fromkeys(
        (
            pairing.LIST_METHOD,
            pairing.APPROVE_METHOD,
            pairing.DENY_METHOD,
            pairing.REVOKE_METHOD,
            pairing.SEED_METHOD,
        ),
        lambda config: config.pairing.server,
    ),
    **dict.fromkeys((GOAL_LIST_METHOD, GOAL_GET_METHOD, TAIL_METHOD), lambda config: config.audit.server),
    cron_terms.LIST_METHOD: lambda config: config.cron.server,
    **dict.fromkeys(memory_terms.OPERATOR_METHODS, lambda config: memory_terms.OPERATOR_SERVER),
}
"""What ``nexo pair``, ``nexo agent ps | attach | discover``, ``nexo audit tail``, ``nexo cron
list`` and ``nexo memory`` ask of the running daemon, and which server of its config answers each."""


async def relay_operator(mesh: Mesh, config: NexoConfig, request: dict[str, Any]) -> dict[str, Any]:
    """``{"op": "operator", "method": M, "params": {...}}`` from a command that reads no config: sent
    to the server the daemon's config names for M, with the channel's platform for pairing ``seed``
    and ``revoke`` taken from that config too, the one its pairing gate canonicalises sender ids by."""
    method = request.get("method")
    server_of = OPERATOR_METHODS.get(str(method))
    if server_of is None:
        return {"error": f"operator requests are {', '.join(sorted(OPERATOR_METHODS))}; not {method!r}"}
    raw = request.get("params")
    params: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    channel = params.get("channel")
    if method in (pairing.SEED_METHOD, pairing.REVOKE_METHOD) and isinstance(channel, str):
        params["platform"] = config.channel(channel).pairing.platform_for(channel)
    params = with_default_agent(config, str(method), params)
    # Field names, not the wire's camelCase: the command prints this as its own ``--json``.
    answer = await relay(
        mesh, {"server": server_of(config), "method": method, "params": params}, by_alias=False
    )
    if method in memory_terms.FOR_ONE_AGENT:
        answer["agent"] = params["agent"]  # the agent the command names in its output
    return answer


def with_default_agent(config: NexoConfig, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request about one agent's memory (``memory_terms.FOR_ONE_AGENT``) for the config's first
    agent when it names none: ``nexo memory`` through the daemon and on a server of its own alike."""
    if method in memory_terms.FOR_ONE_AGENT and not params.get("agent"):
        return {**params, "agent": config.agent(None).id}
    return params


RELAYED_TOOLS = frozenset({"audit_search", "workspace_info"})
"""Server tools the control socket forwards: read-only ones whose answer needs no caller identity
(``workspace_info``: whether the running nexo's workspace offers a shell, for ``nexo setup doctor``)."""


async def relay_tool(mesh: Mesh, request: dict[str, Any]) -> dict[str, Any]:
    """``{"op": "tool", "server": NAME, "tool": T, "arguments": {...}}`` answered with the tool's
    structured result, or ``{"error": ...}`` (the tool's own error text when it failed)."""
    server, tool = request.get("server"), request.get("tool")
    if tool not in RELAYED_TOOLS:
        return {"error": f"the control socket does not forward the tool {tool!r}"}
    if not isinstance(server, str) or server not in mesh.connections:
        return {"error": f"the running mesh has no server {server!r}; see `nexo status`"}
    arguments = request.get("arguments")
    try:
        result = await mesh[server].call_tool(str(tool), arguments if isinstance(arguments, dict) else {})
    except MCPError as exc:
        return {"error": exc.message, "code": exc.code}
    except ServerUnavailable as exc:
        return {"error": str(exc)}
    if result.is_error:
        return {"error": " ".join(getattr(block, "text", "") for block in result.content).strip()}
    return {"result": result.structured_content or {}}
