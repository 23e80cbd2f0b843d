"""Configuration of autonomous activity: heartbeats, proactive ticks, action limits, spend budgets, prices.

The top-level ``autonomy`` key holds :class:`AutonomyConfig`; each agent has its own ``heartbeat`` and
``proactive`` sections. Everything autonomous is off until the operator turns it on, and every limit
has a finite default except where another limit already bounds the same spend (documented per field).
"""

from __future__ import annotations

import re
from datetime import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.proactive.ticks import IDLE_MARKER

DEFAULT_HEARTBEAT_PROMPT = (
    "Heartbeat. Look over pending work, reminders and follow-ups you promised, and act on what is due. "
    f"If nothing needs doing, answer with exactly {IDLE_MARKER} and nothing else."
)
HH_MM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def check_timezone(value: str) -> str:
    """``value`` if it names an IANA time zone; a ValueError naming the fix otherwise."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {value!r}: use an IANA name such as 'UTC', 'Europe/Berlin' or "
            "'America/New_York' (if such names fail too, install the tzdata package)"
        ) from None
    return value


def parse_hh_mm(value: str) -> time:
    match = HH_MM.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a time of day: write it as HH:MM on a 24-hour clock, e.g. '22:00'"
        )
    return time(int(match[1]), int(match[2]))


class HeartbeatConfig(_Strict):
    enabled: bool = False
    """Run the heartbeat prompt on a fixed interval (a goal of source ``heartbeat``)."""
    interval_s: float = Field(1800.0, ge=60)
    """Seconds between heartbeats; at least 60."""
    prompt: str = Field(DEFAULT_HEARTBEAT_PROMPT, min_length=1, max_length=4000)
    """What the agent is asked on each heartbeat; it should allow an idle answer."""


class ProactiveConfig(_Strict):
    enabled: bool = False
    """Send the agent periodic ``<tick>`` messages so it can act on its own."""
    tick_interval_secs: float = Field(900.0, ge=30)
    """Seconds between ticks while the agent is active; at least 30."""
    jitter_pct: float = Field(0.1, ge=0, le=0.5)
    """Each interval is randomised by up to plus or minus this fraction (0 to 0.5)."""
    max_idle_secs: float = Field(14400.0, ge=30)
    """Idle ticks back off, doubling the interval up to this many seconds; any activity resets it."""

    @model_validator(mode="after")
    def _idle_covers_interval(self) -> ProactiveConfig:
        if self.max_idle_secs < self.tick_interval_secs:
            raise ValueError(
                f"max_idle_secs ({self.max_idle_secs:g}) is below tick_interval_secs "
                f"({self.tick_interval_secs:g}): raise max_idle_secs to at least {self.tick_interval_secs:g} "
                "or lower tick_interval_secs"
            )
        return self


class QuietHours(_Strict):
    start: str = "22:00"
    """Start of the quiet window (HH:MM, local to ``timezone``)."""
    end: str = "07:00"
    """End of the quiet window (HH:MM); earlier than ``start`` means the window wraps midnight."""
    timezone: str = "UTC"
    """IANA time zone the times are in, e.g. Europe/Berlin."""

    @field_validator("start", "end")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        parse_hh_mm(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return check_timezone(value)

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHours:
        if self.start == self.end:
            raise ValueError(
                f"start and end are both {self.start}: give the window two different times, "
                "or remove quiet_hours to have none"
            )
        return self

    @property
    def start_time(self) -> time:
        return parse_hh_mm(self.start)

    @property
    def end_time(self) -> time:
        return parse_hh_mm(self.end)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


class Limits(_Strict):
    max_actions_per_cycle: int = Field(20, ge=1)
    """Tool calls one autonomous cycle (a tick, heartbeat or cron fire) may make."""
    max_actions_per_hour: int = Field(50, ge=1)
    """Tool calls all autonomous cycles together may make in any rolling hour."""
    min_cycle_gap_s: float = Field(300.0, ge=0)
    """Seconds from the start of one autonomous cycle to the start of the next."""
    quiet_hours: QuietHours | None = None
    """No autonomous cycle starts inside this window; null: no quiet hours."""


class Budget(_Strict):
    tokens: int | None = Field(None, ge=1)
    """Input plus output tokens; null: no token limit."""
    usd: float | None = Field(None, gt=0)
    """US dollars, computed from ``prices``; null: no money limit."""

    @property
    def unlimited(self) -> bool:
        return self.tokens is None and self.usd is None


class SpendBudgets(_Strict):
    per_goal: Budget = Field(default_factory=Budget)
    """Spend of one goal. Unlimited by default: each agent's ``budgets.max_tokens`` already caps a goal."""
    per_day: Budget = Field(default_factory=lambda: Budget(tokens=2_000_000))
    """Spend of all checked model calls in a day (see ``day_timezone``). Default: 2,000,000 tokens."""
    per_heartbeat: Budget = Field(default_factory=lambda: Budget(tokens=20_000))
    """Spend of one heartbeat run. Default: 20,000 tokens, a few small turns."""
    per_cron_entry: Budget = Field(default_factory=lambda: Budget(tokens=200_000))
    """Spend of one cron entry's fires in a day. Default: 200,000 tokens, one full goal's worth."""

    def items(self) -> list[tuple[str, Budget]]:
        return [
            ("per_goal", self.per_goal),
            ("per_day", self.per_day),
            ("per_heartbeat", self.per_heartbeat),
            ("per_cron_entry", self.per_cron_entry),
        ]


class Price(_Strict):
    input_per_mtok: float = Field(ge=0)
    """USD per million input tokens."""
    output_per_mtok: float = Field(ge=0)
    """USD per million output tokens."""
    cache_read_per_mtok: float | None = Field(None, ge=0)
    """USD per million tokens read from the prompt cache; null: charged as input."""
    cache_write_per_mtok: float | None = Field(None, ge=0)
    """USD per million tokens written to the prompt cache; null: charged as input."""


class AutonomyConfig(_Strict):
    enabled: bool = True
    """The kill switch for heartbeats, ticks and cron prompt fires; operator messages still work."""
    limits: Limits = Field(default_factory=Limits)
    """Caps on what autonomous cycles do and when they may start."""
    budgets: SpendBudgets = Field(default_factory=SpendBudgets)
    """Token and money ceilings, checked before every model call."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """USD prices keyed by ``provider/model`` or ``model``; every model needs one once a usd budget is set."""
    day_timezone: str = "UTC"
    """IANA time zone whose midnight starts a new day for ``per_day`` and ``per_cron_entry``."""
    tick_tools: list[str] = Field(default_factory=list)
    """Tools sent with every heartbeat, proactive tick and wake (glob patterns over model-facing names,
    e.g. ``memory__*``), besides ``sleep`` and ``load_tools``, which loads any other allowed tool when a
    tick needs it. ``['*']``: send every tool with every tick. Cron fires always get every tool."""
    return_digest_after_s: float = Field(43200.0, ge=0)
    """After this many seconds without a message from the operator, the next one is answered with a
    short digest of what happened meanwhile first; 0 turns the digest off."""

    @field_validator("day_timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return check_timezone(value)

    @field_validator("prices")
    @classmethod
    def _price_keys(cls, value: dict[str, Price]) -> dict[str, Price]:
        for key in value:
            if not key.strip() or key != key.strip() or key.startswith("/") or key.endswith("/"):
                raise ValueError(
                    f"price key {key!r} is not a model name: use 'provider/model' (e.g. "
                    "'anthropic/claude-sonnet-4-5') or the bare model name"
                )
        return value

    @model_validator(mode="after")
    def _money_needs_prices(self) -> AutonomyConfig:
        priced = [name for name, budget in self.budgets.items() if budget.usd is not None]
        if priced and not self.prices:
            raise ValueError(
                f"budgets.{priced[0]}.usd is set but prices is empty: add prices for the models in use "
                "(e.g. prices: {'anthropic/claude-sonnet-4-5': {input_per_mtok: 3, output_per_mtok: 15}}) "
                "or remove the usd budget"
            )
        return self
