"""The dashboard's only way to the running mesh: the daemon's control socket, as the CLI uses it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.control import ask, ask_status

CONTROL_TIMEOUT_S = 30.0


class DaemonError(Exception):
    """The daemon answered with an error, or could not be reached; the text is for the operator."""


@dataclass(frozen=True)
class Daemon:
    control: Path
    audit_server: str
    pairing_server: str
    cron_server: str
    memory_server: str
    budgets: dict[str, Any] = field(default_factory=dict)
    """The configured limits, for the Spend page: ``autonomy`` (name -> tokens, usd) and
    ``per_goal_tokens`` (agent -> max_tokens), ``prices`` and ``day_timezone`` (``autonomy.*``).
    Read from the config at start, not state."""

    async def op(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = await ask(self.control, request, timeout=CONTROL_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise DaemonError(f"nexo is not answering on {self.control} ({exc}); see `nexo status`") from exc
        if "error" in answer:
            raise DaemonError(str(answer["error"]))
        return answer

    async def request(self, server: str, method: str, **params: Any) -> dict[str, Any]:
        """A control-plane request the daemon forwards to one of its servers (see orchestrator.relay)."""
        answer = await self.op({"op": "request", "server": server, "method": method, "params": params})
        result: dict[str, Any] = answer["result"]
        return result

    async def status(self) -> dict[str, Any]:
        try:
            return await ask_status(self.control, CONTROL_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise DaemonError(f"nexo is not answering on {self.control} ({exc}); see `nexo status`") from exc

    async def tail(self, **params: Any) -> list[dict[str, Any]]:
        result = await self.request(self.audit_server, "nexo/audit/tail", **params)
        entries: list[dict[str, Any]] = result["entries"]
        return entries
