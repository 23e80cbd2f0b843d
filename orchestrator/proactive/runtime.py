"""Autonomy in the running daemon: heartbeat and proactive ticks per agent, cron fires, the kill switch.

Every unattended turn goes through :func:`run_unattended`; this module decides when one starts,
where its answer goes and what the operator is told. Limits and budgets that stop work are recorded
in the ledger and told to the operator once per limit and day. The kill switch (`autonomy.enabled`,
or `nexo autonomy pause`) stops all of it at once; user messages are never affected.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.goals import AuditSink
from orchestrator.intake.outbound import notify
from orchestrator.mesh import Mesh, ServerConnection
from orchestrator.proactive.budgets import SpendTracker
from orchestrator.proactive.cron import CronFires
from orchestrator.proactive.limits import HOUR, ActionLimiter, LimitHit, Refusal
from orchestrator.proactive.pending import pending_items
from orchestrator.proactive.plan import TickPlan, config_timing_problems, run_plan, start_refusal
from orchestrator.proactive.prices import price_keys
from orchestrator.proactive.restore import actions_by_agent, entries_since, spend_rows
from orchestrator.proactive.spend import Scopes
from orchestrator.proactive.ticks import TickReason, render_tick
from orchestrator.proactive.unattended import TurnReport, charged_model, run_unattended
from orchestrator.proactive.wording import action_cap_text, budget_text
from shared.protocol.audit.bodies import ConfigChangeBody, NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from shared.protocol.audit.methods import TailParams, TailRequest, TailResult

if TYPE_CHECKING:
    from orchestrator.config.nexo import NexoConfig
    from orchestrator.intake import Intake

logger = logging.getLogger("nexo.autonomy")

KILL_SWITCH_PATH = "autonomy.enabled"
THINK_ACT_SCHEDULE = (
    "Proactive tick: nobody asked for this turn. Think, act, schedule: recall what matters (memory "
    "and the audit trail), check the results of scheduled work, then decide whether anything is worth "
    "doing now. If it is, do it, remember what you learned, and schedule a follow-up (cron_create) if "
    "one is needed; you may call sleep to pause ticks. If nothing needs doing, answer exactly [idle]."
)
NOTICE_TIMEOUT_S = 30.0


def utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


class Autonomy:
    def __init__(
        self,
        config: NexoConfig,
        mesh: Mesh,
        sink: AuditSink,
        *,
        clock: Callable[[], datetime] = utc_now,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.config = config
        self.mesh = mesh
        self.sink = sink
        self.clock = clock
        self.rng = rng or random.Random()  # noqa: S311 -- tick jitter, not a secret
        settings = config.autonomy
        self.enabled = settings.enabled
        self.paused_by: str | None = None if settings.enabled else "config (autonomy.enabled: false)"
        self.spend = SpendTracker(
            settings.budgets, settings.prices, day_timezone=settings.day_timezone, clock=clock
        )
        self.limiters: dict[str, ActionLimiter] = {}
        self.intakes: dict[str, Intake] = {}
        self.sleep = sleep
        self.plans: dict[str, TickPlan] = {}
        self._told: set[str] = set()
        self._wake: dict[str, anyio.Event] = {}
        self.cron = CronFires(self)
        self.cycles = 0
        self.stopping = False
        """Set by a shutdown: no cycle starts, and one in flight ends before its next model call."""
        self.interrupted_at_start = 0
        """Unattended goals the previous process left cut short (recorded, never replayed)."""

    # -- the kill switch ---------------------------------------------------------------------

    def is_enabled(self) -> bool:
        return self.enabled

    def is_stopping(self) -> bool:
        return self.stopping

    def stop_starting(self) -> None:
        """A shutdown drains: no new cycle or fire starts; one in flight makes no further model call."""
        self.stopping = True

    def pause(self, by: str) -> bool:
        changed = self.enabled
        self.enabled, self.paused_by = False, by
        if changed:
            self._record_switch("paused", by)
        return changed

    def resume(self, by: str) -> bool:
        changed = not self.enabled
        self.enabled, self.paused_by = True, None
        if changed:
            self._record_switch("resumed", by)
            for event in self._wake.values():
                event.set()
        return changed

    def _record_switch(self, what: str, by: str) -> None:
        logger.warning("autonomy %s by %s", what, by)
        body = ConfigChangeBody(path=KILL_SWITCH_PATH, change="set", detail=f"{what} by {by}"[:4000])
        self.sink.record(EntryDraft.of(body, source="orchestrator", subject=f"autonomy {what}"))

    def status(self) -> dict[str, Any]:
        spent = self.spend.day_spent()
        return {
            "enabled": self.enabled,
            "paused_by": self.paused_by,
            "day": {
                "input_tokens": spent.input_tokens,
                "output_tokens": spent.output_tokens,
                "usd": spent.usd,
            },
            "day_resets_at": self.spend.day_resets_at().isoformat(),
            "cycles": self.cycles,
            "interrupted_at_start": self.interrupted_at_start,
            "agents": {
                agent_id: {
                    "model": charged_model(intake),
                    "price": self._price(charged_model(intake)),
                    "heartbeat": intake.agent.heartbeat.enabled,
                    "proactive": intake.agent.proactive.enabled,
                    "actions_last_hour": self.limiter(agent_id).hour_count(),
                    "sleeping_until": _iso(self.plans[agent_id].wake_at) if agent_id in self.plans else None,
                }
                for agent_id, intake in self.intakes.items()
            },
        }

    def _price(self, model: str) -> dict[str, Any] | None:
        """The price an agent's calls are charged at, and the key it was found under."""
        prices = self.config.autonomy.prices
        key = next((key for key in price_keys(model) if key in prices), None)
        if key is None:
            return None
        return {"key": key, **prices[key].model_dump()}

    # -- boot --------------------------------------------------------------------------------

    async def restore(self) -> None:
        """The kill switch as the last process left it, and every counter a limit holds across
        restarts (today's spend, per cron entry too, and the last hour's actions), from the ledger."""
        audit = self.mesh.get(self.config.audit.server)
        if audit is None:
            return
        now = self.clock()
        try:
            switches = await audit.request(
                TailRequest(params=TailParams(kind="config_change", limit=200)), TailResult, timeout=30
            )
            since = self.spend.day_started_at()
            spent = [
                *await entries_since(audit, "turn", since),
                *await entries_since(audit, "spend_reserved", since),
            ]
            actions = await entries_since(audit, "tool_call", now - HOUR)
        except Exception as exc:  # noqa: BLE001 -- a fresh start is the safe fallback
            logger.warning("autonomy state not restored from the ledger: %s", exc)
            return
        for entry in reversed(switches.entries):
            if entry.body.get("path") == KILL_SWITCH_PATH:
                detail = str(entry.body.get("detail", ""))
                if detail.startswith("paused") and self.config.autonomy.enabled:
                    self.enabled, self.paused_by = False, detail.removeprefix("paused by ")
                break
        self.spend.restore(spend_rows(spent))
        for agent_id, taken in actions_by_agent(actions).items():
            self.limiter(agent_id).restore(taken)

    # -- running -----------------------------------------------------------------------------

    def limiter(self, agent_id: str) -> ActionLimiter:
        limiter = self.limiters.get(agent_id)
        if limiter is None:
            limiter = self.limiters[agent_id] = ActionLimiter(self.config.autonomy.limits, clock=self.clock)
        return limiter

    async def run(self, intakes: list[Intake]) -> None:
        self.intakes = {intake.agent.id: intake for intake in intakes}
        for problem in config_timing_problems(self.config):
            logger.warning("%s", problem)
        async with anyio.create_task_group() as tg:
            for intake in intakes:
                if intake.agent.heartbeat.enabled or intake.agent.proactive.enabled:
                    tg.start_soon(self.run_agent, intake, name=f"autonomy:{intake.agent.id}")
            tg.start_soon(self.cron.run, name="cron-fires")

    async def _wait_enabled(self, agent_id: str) -> None:
        while not self.enabled:
            event = self._wake.setdefault(agent_id, anyio.Event())
            await event.wait()
            self._wake.pop(agent_id, None)

    async def run_agent(self, intake: Intake) -> None:
        """Heartbeats, proactive ticks and wakes of one agent, on one timeline (see plan.py)."""
        agent = intake.agent
        plan = TickPlan(agent.heartbeat, agent.proactive, start=self.clock(), rng=self.rng)

        async def tick(reason: TickReason) -> TurnReport | None:
            prompt = agent.heartbeat.prompt if reason == "heartbeat" else None
            wake_note = plan.wake_note if reason == "wake" else None
            return await self.safe_tick(intake, reason, prompt, wake_note=wake_note)

        def refusal(reason: TickReason) -> Refusal | None:
            return self.refusal(agent.id, reason)

        async def ready() -> None:
            await self._wait_enabled(agent.id)

        self.plans[agent.id] = plan
        await run_plan(plan, clock=self.clock, sleep=self.sleep, ready=ready, refusal=refusal, tick=tick)

    def refusal(self, agent_id: str, reason: TickReason) -> Refusal | None:
        return start_refusal(self.limiter(agent_id), reason)

    async def safe_tick(
        self, intake: Intake, reason: TickReason, prompt: str | None, *, wake_note: str | None = None
    ) -> TurnReport | None:
        """A tick whose failure is logged and recorded; the next one comes as scheduled."""
        try:
            return await self.tick(intake, reason, prompt, wake_note=wake_note)
        except Exception as exc:
            logger.exception("%s cycle of %s failed", reason, intake.agent.id)
            self.sink.record(
                EntryDraft.of(
                    NoticeBody(level="error", message=f"{reason} cycle failed: {exc}"[:4000]),
                    source=reason,
                    agent=intake.agent.id,
                    subject=f"{reason} failed",
                )
            )
            return None

    async def tick(
        self, intake: Intake, reason: TickReason, prompt: str | None, *, wake_note: str | None = None
    ) -> TurnReport | None:
        """One heartbeat, proactive or wake cycle, unless a limit, quiet hours or a user message says no."""
        agent_id = intake.agent.id
        if self.stopping:
            return None
        limiter = self.limiter(agent_id)
        refusal = self.refusal(agent_id, reason)
        if refusal is not None:
            logger.info("%s tick of %s skipped: %s", reason, agent_id, refusal.reason)
            return None
        await intake.wait_quiet()  # user messages first
        cycle = limiter.start_cycle()
        self.cycles += 1
        now = self.clock()
        pending = await pending_items(
            self.mesh,
            audit_server=self.config.audit.server,
            cron_server=self.config.cron.server,
            agent=agent_id,
            wake_note=wake_note,
        )
        body = render_tick(now, reason, intake.idle_for_s(), pending)
        text = f"{body}\n{prompt or THINK_ACT_SCHEDULE}"
        run_id = f"{reason}-{now.strftime('%Y%m%dT%H%M%S')}"
        report = await run_unattended(
            intake,
            prompt=text,
            source=reason,
            cycle=cycle,
            spend=self.spend,
            scopes_for=lambda goal: Scopes(goal=goal, heartbeat=run_id if reason == "heartbeat" else None),
            enabled=self.is_enabled,
            stopping=self.is_stopping,
            sleep_allowed=True,
            origin=Origin(source=reason),
            offered=None if "*" in self.config.autonomy.tick_tools else self.config.autonomy.tick_tools,
        )
        self.spend.finish(heartbeat=run_id)
        await self.after(intake, report, source=reason)
        if report.ended == "answered":
            operator = self.config.operator
            await self.say(
                operator.channel,
                operator.chat_id,
                report.text,
                key=f"{reason}:{report.goal_id}",
                agent=agent_id,
            )
        return report

    async def after(self, intake: Intake, report: TurnReport, *, source: str) -> None:
        """Record and tell (once) what stopped an unattended turn."""
        hit: LimitHit | None = report.limit
        if report.ended == "limit" and hit is not None:
            await self.limit_notice(
                intake.agent.id, hit.axis, action_cap_text(source, intake.agent.id, hit), source=source
            )
        elif report.ended == "budget" and report.budget is not None:
            budget = report.budget
            await self.limit_notice(intake.agent.id, budget.axis, budget_text(source, budget), source=source)
        elif report.ended == "limit":
            await self.limit_notice(
                intake.agent.id, report.reason, f"{source}: stopped ({report.reason})", source=source
            )

    async def limit_notice(self, agent_id: str, axis: str, text: str, *, source: str) -> None:
        day = self.clock().date().isoformat()
        self.sink.record(
            EntryDraft.of(
                NoticeBody(level="warning", message=text[:4000], limit=axis[:200]),
                source=source,
                agent=agent_id,
                subject=f"limit {axis}"[:500],
            )
        )
        key = f"limit:{agent_id}:{axis}:{day}"
        if key in self._told:
            return
        self._told.add(key)
        operator = self.config.operator
        await self.say(
            operator.channel, operator.chat_id, f"[limit] {text}", key=key, notice=True, agent=agent_id
        )

    async def say(
        self, server: str, chat_id: str, text: str, *, key: str, notice: bool = False, agent: str = ""
    ) -> None:
        try:
            with anyio.fail_after(NOTICE_TIMEOUT_S):
                await notify(
                    self.mesh,
                    self.config,
                    server,
                    chat_id,
                    text,
                    key=key,
                    notice=notice,
                    sink=self.sink,
                    agent=agent,
                )
        except Exception as exc:  # noqa: BLE001 -- the ledger has it; a channel outage must not stop autonomy
            logger.warning("could not deliver to %s:%s: %s", server, chat_id, exc)

    def cron_connection(self) -> ServerConnection | None:
        return self.mesh.get(self.config.cron.server)

    async def run_fire_turn(
        self, intake: Intake, prompt: str, *, goal_id: str, entry_id: str, source: str
    ) -> TurnReport:
        limiter = self.limiter(intake.agent.id)
        await intake.wait_quiet()
        cycle = limiter.start_cycle()
        self.cycles += 1
        return await run_unattended(
            intake,
            prompt=prompt,
            source=source,
            cycle=cycle,
            spend=self.spend,
            scopes_for=lambda goal: Scopes(goal=goal, cron_entry=entry_id),
            enabled=self.is_enabled,
            stopping=self.is_stopping,
            goal_id=goal_id,
            origin=Origin(source=source),
        )
