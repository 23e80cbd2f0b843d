"""When an agent's next autonomous tick runs: heartbeats, proactive ticks and wakes on one timeline.

One loop per agent takes the earliest due tick. A start refused by ``min_cycle_gap_s`` or quiet hours
is retried when the refusal says, and keeps its place in the line: it is not an idle tick (no back-off
doubling), and a heartbeat due later cannot take its turn, so heartbeats never starve proactive ticks.
A wake the agent asked for with ``sleep`` is held back only by quiet hours, never by the cycle gap:
the agent chose that time. :func:`timing_problems` names the intervals the limits make impossible.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from orchestrator.proactive.ticks import ProactiveSchedule, TickReason

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.proactive.config import HeartbeatConfig, Limits, ProactiveConfig
    from orchestrator.proactive.limits import ActionLimiter, Refusal

logger = logging.getLogger("nexo.autonomy")

PRIORITY: dict[TickReason, int] = {"wake": 0, "heartbeat": 1, "proactive": 2}
"""Which of two ticks due at the same moment goes first."""
IDLE_ENDINGS = frozenset({"idle", "preempted"})


class Ran(Protocol):
    """What the plan needs to know about a tick that ran (a TurnReport)."""

    @property
    def ended(self) -> str: ...
    @property
    def sleep_ms(self) -> int | None: ...
    @property
    def sleep_reason(self) -> str: ...


class TickPlan:
    """The due time of each kind of tick for one agent, and what running or refusing one changes."""

    def __init__(
        self,
        heartbeat: HeartbeatConfig,
        proactive: ProactiveConfig,
        *,
        start: datetime,
        rng: random.Random,
    ) -> None:
        self.heartbeat_s = heartbeat.interval_s if heartbeat.enabled else None
        self.schedule = ProactiveSchedule(proactive, rng=rng) if proactive.enabled else None
        self.due: dict[TickReason, datetime] = {}
        self.not_before: datetime | None = None
        self.wake_note = ""
        """What the agent said it waits for, for the wake tick."""
        if self.heartbeat_s is not None:
            self.due["heartbeat"] = start + timedelta(seconds=self.heartbeat_s)
        if self.schedule is not None:
            self.due["proactive"] = start + timedelta(seconds=self.schedule.next_delay(idle=False))

    @property
    def wake_at(self) -> datetime | None:
        return self.due.get("wake")

    def next(self) -> tuple[TickReason, datetime] | None:
        """The tick to run next and when: the earliest due, no earlier than a refusal allows."""
        if not self.due:
            return None
        reason = min(self.due, key=lambda kind: (self.due[kind], PRIORITY[kind]))
        at = self.due[reason]
        if self.not_before is not None and self.not_before > at:
            at = self.not_before
        return reason, at

    def refused(self, retry_at: datetime, now: datetime) -> None:
        """The tick may not start before ``retry_at``: it waits, keeping its place in the line."""
        self.not_before = max(retry_at, now + timedelta(seconds=1))

    def ran(self, reason: TickReason, now: datetime, report: Ran | None) -> None:
        """Schedule what follows the tick of ``reason`` that ended at ``now`` (None: it failed)."""
        self.not_before = None
        if reason == "heartbeat" and self.heartbeat_s is not None:
            step = timedelta(seconds=self.heartbeat_s)
            following = self.due["heartbeat"] + step
            while following <= now:  # missed heartbeats are not made up in a burst
                following += step
            self.due["heartbeat"] = following
        else:
            self.due.pop("wake", None)
        if report is not None and report.sleep_ms is not None:
            self.due["wake"] = now + timedelta(milliseconds=report.sleep_ms)
            self.wake_note = report.sleep_reason
            self.due.pop("proactive", None)
            if self.schedule is not None:
                self.schedule.note_activity()
            return
        if reason != "heartbeat" and self.schedule is not None:
            idle = report is None or report.ended in IDLE_ENDINGS
            self.due["proactive"] = now + timedelta(seconds=self.schedule.next_delay(idle=idle))


async def run_plan(
    plan: TickPlan,
    *,
    clock: Callable[[], datetime],
    sleep: Callable[[float], Awaitable[None]],
    ready: Callable[[], Awaitable[None]],
    refusal: Callable[[TickReason], Refusal | None],
    tick: Callable[[TickReason], Awaitable[Ran | None]],
) -> None:
    """Run ``plan`` forever: wait for the next tick, wait until ``ready``, then start or defer it."""
    while (planned := plan.next()) is not None:
        reason, at = planned
        delay = (at - clock()).total_seconds()
        if delay > 0:
            await sleep(delay)
        await ready()
        refused = refusal(reason)
        if refused is not None:
            logger.info("%s tick deferred to %s: %s", reason, refused.retry_at.isoformat(), refused.reason)
            plan.refused(refused.retry_at, clock())
            continue
        report = await tick(reason)
        plan.ran(reason, clock(), report)


def start_refusal(limiter: ActionLimiter, reason: TickReason) -> Refusal | None:
    """Why a tick of ``reason`` may not start now; a wake the agent asked for ignores the cycle gap."""
    refused = limiter.can_start_cycle()
    if refused is not None and reason == "wake" and refused.axis == "cooldown":
        return None
    return refused


def timing_problems(
    agent: str, heartbeat: HeartbeatConfig, proactive: ProactiveConfig, limits: Limits
) -> list[str]:
    """A line per interval of ``agent`` that ``limits`` make impossible, naming both settings and the fix."""
    gap = limits.min_cycle_gap_s
    problems: list[str] = []
    if heartbeat.enabled and heartbeat.interval_s < gap:
        problems.append(
            f"agents.{agent}.heartbeat.interval_s ({heartbeat.interval_s:g} s) is shorter than "
            f"autonomy.limits.min_cycle_gap_s ({gap:g} s): heartbeats would run every {gap:g} s. Fix: raise "
            f"interval_s to at least {gap:g} or lower min_cycle_gap_s to {heartbeat.interval_s:g} or less"
        )
    if proactive.enabled and proactive.tick_interval_secs < gap:
        problems.append(
            f"agents.{agent}.proactive.tick_interval_secs ({proactive.tick_interval_secs:g} s) is shorter "
            f"than autonomy.limits.min_cycle_gap_s ({gap:g} s): ticks would come every {gap:g} s at best. "
            f"Fix: raise tick_interval_secs to at least {gap:g} or lower min_cycle_gap_s to "
            f"{proactive.tick_interval_secs:g} or less"
        )
    if heartbeat.enabled and proactive.enabled and not problems and gap > 0:
        share = gap / heartbeat.interval_s + gap / proactive.tick_interval_secs
        if share > 1:
            problems.append(
                f"agents.{agent}: a heartbeat every {heartbeat.interval_s:g} s and a proactive tick every "
                f"{proactive.tick_interval_secs:g} s need cycles closer together than "
                f"autonomy.limits.min_cycle_gap_s ({gap:g} s) allows, so both run late. Fix: lower "
                f"min_cycle_gap_s to {_fitting_gap(heartbeat.interval_s, proactive.tick_interval_secs):g} or "
                "less, or lengthen heartbeat.interval_s or proactive.tick_interval_secs"
            )
    return problems


def _fitting_gap(heartbeat_s: float, tick_s: float) -> float:
    return float(int(heartbeat_s * tick_s / (heartbeat_s + tick_s)))


def config_timing_problems(config: NexoConfig) -> list[str]:
    """:func:`timing_problems` of every agent in ``config``."""
    limits = config.autonomy.limits
    return [
        problem
        for agent in config.agents
        for problem in timing_problems(agent.id, agent.heartbeat, agent.proactive, limits)
    ]
