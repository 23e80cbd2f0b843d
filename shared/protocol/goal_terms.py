"""The goal registry's vocabulary (kinds, terminal statuses, method names, the not-found code),
without the wire models.

``nexo agent ps`` and ``attach`` check their arguments and read the running daemon's JSON answer
with these alone, importing neither pydantic nor the MCP types; :mod:`shared.protocol.audit` builds
its models on the same values.
"""

from __future__ import annotations

from typing import Literal, get_args

GOAL_LIST_METHOD = "nexo/audit/goals/list"
GOAL_GET_METHOD = "nexo/audit/goals/get"
GOAL_NOT_FOUND = -32044
"""JSON-RPC error code (implementation-defined range) for an unknown goal id."""

GoalKind = Literal["interactive", "bg", "daemon", "daemon_worker"]
GOAL_KINDS: tuple[str, ...] = get_args(GoalKind)
TERMINAL_STATUSES: frozenset[str] = frozenset({"done", "failed", "cancelled", "lost_on_restart"})
