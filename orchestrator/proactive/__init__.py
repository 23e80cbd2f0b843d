"""Autonomy's building blocks: its config, action limits, spend budgets, the sleep tool, ticks, the digest.

None of these modules imports ``orchestrator.config``, so that package can build on their models.
"""

from orchestrator.proactive.budgets import SpendTracker
from orchestrator.proactive.config import (
    AutonomyConfig,
    Budget,
    HeartbeatConfig,
    Limits,
    Price,
    ProactiveConfig,
    QuietHours,
    SpendBudgets,
)
from orchestrator.proactive.digest import build_digest, needs_digest
from orchestrator.proactive.limits import ActionLimiter, Cycle, LimitHit, Refusal, quiet_until
from orchestrator.proactive.prices import PriceMissing, find_price
from orchestrator.proactive.sleep import (
    SLEEP_INPUT_SCHEMA,
    SLEEP_TOOL,
    SLEEP_TOOL_NAME,
    SleepChoice,
    SleepRequest,
    choose_sleep,
    parse_sleep,
)
from orchestrator.proactive.spend import BudgetHit, Scopes, Spend, SpendRow
from orchestrator.proactive.ticks import (
    IDLE_MARKER,
    TICK_TAG,
    ProactiveSchedule,
    is_idle_answer,
    render_tick,
)

__all__ = [
    "IDLE_MARKER",
    "SLEEP_INPUT_SCHEMA",
    "SLEEP_TOOL",
    "SLEEP_TOOL_NAME",
    "TICK_TAG",
    "ActionLimiter",
    "AutonomyConfig",
    "Budget",
    "BudgetHit",
    "Cycle",
    "HeartbeatConfig",
    "LimitHit",
    "Limits",
    "Price",
    "PriceMissing",
    "ProactiveConfig",
    "ProactiveSchedule",
    "QuietHours",
    "Refusal",
    "Scopes",
    "SleepChoice",
    "SleepRequest",
    "Spend",
    "SpendBudgets",
    "SpendRow",
    "SpendTracker",
    "build_digest",
    "choose_sleep",
    "find_price",
    "is_idle_answer",
    "needs_digest",
    "parse_sleep",
    "quiet_until",
    "render_tick",
]
