"""A goal as the audit server's registry keeps it: its origin, status and budget spent."""

from __future__ import annotations

from pydantic import Field

from shared.protocol.audit.terms import GoalKind, GoalStatus
from shared.protocol.deferred import WireModel


class Origin(WireModel):
    source: str
    """channel:<server> for a chat, or cli, cron, heartbeat."""
    session_key: str | None = None
    chat_id: str | None = None


class Budget(WireModel):
    turns: int = Field(0, ge=0)
    tokens: int = Field(0, ge=0)
    cost_usd: float = Field(0.0, ge=0)
    wall_s: float = Field(0.0, ge=0)


class Goal(WireModel):
    id: str
    agent: str
    kind: GoalKind
    status: GoalStatus
    origin: Origin
    prompt: str
    """The first line of the prompt, capped."""
    phase: str
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    last_decision: str
    last_event: str
    budget: Budget
    outcome: str
    notified: bool
    """Set once the origin was told that the goal was lost on a restart."""
