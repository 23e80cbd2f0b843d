"""What spend budgets speak of: scopes a call counts against, spend, past calls, a budget hit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

ScopeName = Literal["goal", "day", "heartbeat", "cron_entry"]
BudgetAxis = Literal[
    "goal_tokens", "goal_usd", "day_tokens", "day_usd",
    "heartbeat_tokens", "heartbeat_usd", "cron_entry_tokens", "cron_entry_usd",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Scopes:
    """What a model call counts against: its goal, and the heartbeat run or cron entry behind it."""

    goal: str
    heartbeat: str | None = None
    """The heartbeat run's id when the call is part of one."""
    cron_entry: str | None = None
    """The cron entry's id when the call is part of one of its fires."""


@dataclass(frozen=True, slots=True)
class Spend:
    input_tokens: int = 0
    """Input tokens, prompt-cache reads and writes included."""
    output_tokens: int = 0
    usd: float | None = 0.0
    """None when part of it was used by a model without a price."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class SpendRow:
    """One past model call, as read back from the audit ledger."""

    at: datetime
    model: str
    input_tokens: int
    output_tokens: int
    goal: str
    heartbeat: str | None = None
    cron_entry: str | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class BudgetHit:
    """A model call refused because a scope spent its budget."""

    axis: BudgetAxis
    spent: float
    limit: float
    reason: str
    resets_at: datetime | None = None
    """Midnight in ``day_timezone`` for the day and cron-entry budgets; None for goals and heartbeats."""
