"""What ``nexo status`` shows of one server connection: its state and a snapshot of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ServerState = Literal["starting", "ready", "backoff", "open", "stopped"]


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    name: str
    transport: str
    target: str
    state: ServerState
    tools: int
    last_error: str | None
    restarts: int
    breaker: str
    protocol_version: str | None
    capabilities: tuple[str, ...]
    next_try_in_s: float | None = None
    """While waiting to reconnect (``backoff`` or ``open``): seconds until the next attempt."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "target": self.target,
            "state": self.state,
            "tools": self.tools,
            "last_error": self.last_error,
            "restarts": self.restarts,
            "breaker": self.breaker,
            "protocol_version": self.protocol_version,
            "capabilities": list(self.capabilities),
            "next_try_in_s": self.next_try_in_s,
        }
