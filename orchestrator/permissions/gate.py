"""The interim permission gate: read-only tools run; anything else waits for the operator."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.loop.tools import Decision
from orchestrator.mesh import CatalogTool, ServerConnection
from orchestrator.permissions.approvals import ApprovalBroker


class OperatorGate:
    def __init__(self, broker: ApprovalBroker, relays: Callable[[], Sequence[ServerConnection]]) -> None:
        self._broker = broker
        self._relays = relays

    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision:
        if tool.read_only:
            return Decision(True, "read-only tool")
        return await self._broker.ask(tool, arguments, call_id, self._relays())
