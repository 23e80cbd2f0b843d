"""One unattended turn: a heartbeat, a proactive tick or a cron fire, with nobody watching.

Before every model call it checks the kill switch, a waiting user message (which preempts it), the
cycle's action caps and the spend budgets; each tool call takes one action. Destructive tools are
denied unless an approval is live (the policy gate's unattended mode). The turn is marked
unattended in the ledger; an idle answer sends nothing to anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from orchestrator.goals import LedgerObserver
from orchestrator.llm import Usage
from orchestrator.loop import GoalResult, Outcome, run_goal
from orchestrator.loop.tools import Decision, Gate
from orchestrator.mesh import CatalogTool
from orchestrator.proactive.budgets import BudgetHit, PriceMissing, Scopes, SpendTracker
from orchestrator.proactive.limits import Cycle, LimitHit
from orchestrator.proactive.sleep import SLEEP_INPUT_SCHEMA, SLEEP_TOOL_NAME, choose_sleep, parse_sleep
from orchestrator.proactive.ticks import IDLE_MARKER, is_idle_answer
from orchestrator.proactive.toolbox import on_demand
from orchestrator.tools.local import GoalContext, LocalTool, LocalToolError, LocalTools, local_catalog_tools
from shared.protocol.audit import Origin
from shared.protocol.memory import PROVENANCE_META_KEY

if TYPE_CHECKING:
    from orchestrator.intake import Intake

logger = logging.getLogger("nexo.autonomy")

Ended = Literal["answered", "idle", "preempted", "paused", "limit", "budget", "failed", "cancelled"]


@dataclass
class TurnReport:
    ended: Ended
    goal_id: str
    text: str = ""
    reason: str = ""
    sleep_ms: int | None = None
    sleep_reason: str = ""
    """What the agent said it waits for when it called sleep."""
    limit: LimitHit | None = None
    budget: BudgetHit | None = None
    usage: Usage = field(default_factory=Usage)


class _Guard:
    """The checks before every model call of the turn (the loop's CallGuard)."""

    def __init__(
        self, intake: Intake, enabled: Any, cycle: Cycle, spend: SpendTracker, scopes: Scopes, model: str
    ) -> None:
        self.intake = intake
        self.enabled = enabled
        self.cycle = cycle
        self.spend = spend
        self.scopes = scopes
        self.model = model
        self.budget: BudgetHit | None = None
        self.stop: str | None = None

    def before_call(self) -> str | None:
        if not self.enabled():
            self.stop = "autonomy_paused"
        elif self.intake.busy:
            self.stop = "preempted"
        elif self.cycle.stopped is not None:
            self.stop = self.cycle.stopped.axis
        else:
            try:
                self.budget = self.spend.check(
                    self.scopes,
                    self.model,
                    reserve_tokens=self.spend.largest_call_tokens,
                    reserve_usd=self.spend.largest_call_usd,
                )
            except PriceMissing as exc:
                logger.error("%s", exc)
                self.stop = "price_missing"
                return self.stop
            if self.budget is not None:
                self.stop = self.budget.axis
        return self.stop

    def after_call(self, usage: Usage) -> None:
        self.spend.record(
            self.scopes,
            self.model,
            usage,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )


class _ActionGate:
    """Each tool call of an unattended turn takes one action from the cycle, then the policy decides."""

    def __init__(self, cycle: Cycle, inner: Gate) -> None:
        self.cycle = cycle
        self.inner = inner

    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision:
        hit = self.cycle.take_action()
        if hit is not None:
            return Decision(False, hit.reason)
        return await self.inner.check(tool, arguments, call_id)


def _sleep_tool(holder: dict[str, int], reasons: list[str]) -> LocalTool:
    async def sleep(_: GoalContext, arguments: Mapping[str, Any]) -> str:
        try:
            request = parse_sleep(arguments)
        except ValueError as exc:
            raise LocalToolError(str(exc)) from exc
        choice = choose_sleep(request.duration_ms)
        holder["ms"] = choice.duration_ms
        reasons[:] = [request.reason]
        return f"{choice.note} End this turn now; answer {IDLE_MARKER} if there is nothing else to say."

    return LocalTool(
        name=SLEEP_TOOL_NAME,
        description=(
            "Pause proactive work: nothing runs until the wake-up (user messages still come first). "
            "Prefer up to 270000 ms to keep context warm, or 1200000 ms and more for long waits."
        ),
        input_schema=dict(SLEEP_INPUT_SCHEMA),
        handler=sleep,
        read_only=True,
        classification="read_only",
        tier="safe",
    )


def _ended(result: GoalResult, guard: _Guard, gate: _ActionGate) -> Ended:
    if result.outcome is Outcome.BUDGET_EXHAUSTED and guard.stop is not None:
        if guard.stop == "preempted":
            return "preempted"
        if guard.stop == "autonomy_paused":
            return "paused"
        return "budget" if guard.budget is not None else "limit"
    if gate.cycle.stopped is not None:
        return "limit"
    if result.outcome is Outcome.DONE:
        return "idle" if is_idle_answer(result.text) else "answered"
    return "failed"


async def run_unattended(
    intake: Intake,
    *,
    prompt: str,
    source: str,
    cycle: Cycle,
    spend: SpendTracker,
    scopes_for: Any,
    enabled: Any,
    goal_id: str | None = None,
    sleep_allowed: bool = False,
    origin: Origin | None = None,
    offered: Sequence[str] | None = None,
) -> TurnReport:
    """Run one unattended goal for ``intake``'s agent; ``scopes_for(goal_id)`` names its spend scopes."""
    agent = intake.agent
    model = f"{agent.model.provider}/{intake.provider.describe()}"
    goal = await intake.goals.start(
        agent=agent.id,
        kind="daemon",
        origin=origin or Origin(source=source),
        prompt=prompt,
        goal_id=goal_id,
    )
    scopes: Scopes = scopes_for(goal.id)
    guard = _Guard(intake, enabled, cycle, spend, scopes, model)
    gate = _ActionGate(cycle, intake.gate.for_turn(unattended=True))
    slept: dict[str, int] = {}
    sleep_reasons: list[str] = []
    tools = list(intake.local.tools.values())
    if sleep_allowed:
        tools.append(_sleep_tool(slept, sleep_reasons))
    result: GoalResult | None = None
    try:
        with goal.scope:
            await intake.goals.wait_admitted(goal)
            catalog = intake.catalog().with_tools(
                local_catalog_tools([t for t in tools if t.name == SLEEP_TOOL_NAME]), ["*"]
            )
            if offered is not None:  # tools on demand (toolbox.py): few tools up front
                catalog, loader = on_demand(catalog, offered, always=[SLEEP_TOOL_NAME])
                tools.append(loader)
            local = LocalTools(tools)
            result = await run_goal(
                provider=intake.provider,
                system=agent.system_prompt,
                prompt=prompt,
                catalog=catalog,
                runner=intake.runner.for_goal(
                    local, GoalContext(agent.id, goal.id), meta={PROVENANCE_META_KEY: "agent"}
                ),
                gate=gate,
                budgets=agent.budgets,
                max_tokens=agent.model.max_tokens,
                observer=LedgerObserver(
                    intake.sink, intake.goals, goal, source, intake.metrics, model=model, unattended=True
                ),
                guard=guard,
            )
    finally:
        spend.finish(goal=goal.id)
        await _finish(intake, goal, result)
    if result is None:
        return TurnReport("cancelled", goal.id, reason=goal.cancel_reason or "cancelled")
    ended = _ended(result, guard, gate)
    return TurnReport(
        ended,
        goal.id,
        text=result.text or "",
        reason=guard.stop or result.summary(),
        sleep_ms=slept.get("ms"),
        sleep_reason=sleep_reasons[0] if sleep_reasons else "",
        limit=cycle.stopped,
        budget=guard.budget,
        usage=result.usage,
    )


async def _finish(intake: Intake, goal: Any, result: GoalResult | None) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
        if result is not None:
            await intake.goals.finish(goal, result)
        else:
            await intake.goals.finish(
                goal, None, status="cancelled", outcome=goal.cancel_reason or "shutdown"
            )
