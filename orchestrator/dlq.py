"""Dead letters across channel servers: list, replay and purge, for the daemon and the CLI alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.mesh import ServerConnection
from shared.protocol.events import (
    DeadListParams,
    DeadListRequest,
    DeadListResult,
    PurgeDeadParams,
    PurgeDeadRequest,
    PurgeDeadResult,
    ReplayParams,
    ReplayRequest,
    ReplayResult,
)

TIMEOUT_S = 10.0


def parse_target(value: str) -> tuple[str, int]:
    server, sep, seq = value.rpartition(":")
    if not sep or not server or not seq.isdigit():
        raise ValueError(f"expected SERVER:SEQ as `nexo dlq list` shows it, e.g. console:42; got {value!r}")
    return server, int(seq)


async def dlq(connections: Mapping[str, ServerConnection], request: Mapping[str, Any]) -> dict[str, Any]:
    """``request``: {"action": "list"|"replay"|"purge", "server"?: name, "target"?: "SERVER:SEQ"}."""
    action = request.get("action")
    wanted = request.get("server")
    if wanted is not None and wanted not in connections:
        return {"error": f"no channel server {wanted!r}; use one of: {', '.join(sorted(connections))}"}
    chosen = {name: c for name, c in connections.items() if wanted in (None, name)}
    if action == "list":
        found: list[dict[str, Any]] = []
        for name, connection in chosen.items():
            result = await connection.request(
                DeadListRequest(params=DeadListParams()), DeadListResult, timeout=TIMEOUT_S
            )
            found.extend({"server": name, **event.model_dump(mode="json")} for event in result.events)
        return {"dead": found}
    if action == "replay":
        try:
            server, seq = parse_target(str(request.get("target", "")))
        except ValueError as exc:
            return {"error": str(exc)}
        if server not in connections:
            return {"error": f"no channel server {server!r}; use one of: {', '.join(sorted(connections))}"}
        replayed = await connections[server].request(
            ReplayRequest(params=ReplayParams(seqs=[seq])), ReplayResult, timeout=TIMEOUT_S
        )
        if replayed.replayed == 0:
            return {"error": f"{server}:{seq} is not a dead letter (see `nexo dlq list`)"}
        return {"replayed": f"{server}:{seq}"}
    if action == "purge":
        purged = 0
        for connection in chosen.values():
            dropped = await connection.request(
                PurgeDeadRequest(params=PurgeDeadParams()), PurgeDeadResult, timeout=TIMEOUT_S
            )
            purged += dropped.purged
        return {"purged": purged}
    return {"error": f"unknown dlq action {action!r}; expected list, replay or purge"}


def channel_connections(connections: Mapping[str, ServerConnection]) -> dict[str, ServerConnection]:
    """The connected servers that keep a durable event log (and so can hold dead letters)."""
    return {name: c for name, c in connections.items() if c.has_capability("nexo/events")}
