"""One unattended turn: a heartbeat, a proactive tick or a cron fire, with nobody watching.

Before every model call it checks a shutdown in progress, the kill switch, a waiting user message
(which preempts it), the cycle's action caps (the hourly one included) and the spend budgets, whose
bound on the call is stored in the ledger before it is sent; each tool call takes one action.
Destructive tools are denied unless an approval is live (the policy gate's unattended mode). The turn
is marked unattended in the ledger; an idle answer sends nothing to anyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from orchestrator.goals import LedgerObserver
from orchestrator.llm import Usage
from orchestrator.loop import GoalResult, Outcome, run_goal
from orchestrator.loop.goal import PendingCall
from orchestrator.loop.tools import Decision, Gate
from orchestrator.mesh import CatalogTool
from orchestrator.proactive.budgets import SpendTracker
from orchestrator.proactive.estimate import estimate_call
from orchestrator.proactive.limits import Cycle, LimitHit
from orchestrator.proactive.prices import PriceMissing
from orchestrator.proactive.sleep import SLEEP_INPUT_SCHEMA, SLEEP_TOOL_NAME, choose_sleep, parse_sleep
from orchestrator.proactive.spend import BudgetHit, Scopes
from orchestrator.proactive.ticks import IDLE_MARKER, is_idle_answer
from orchestrator.proactive.toolbox import on_demand
from orchestrator.tools.local import GoalContext, LocalTool, LocalToolError, LocalTools, local_catalog_tools
from shared.protocol.audit.bodies import SpendReservedBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from shared.protocol.memory.meta import PROVENANCE_META_KEY

if TYPE_CHECKING:
    from orchestrator.intake import Intake

logger = logging.getLogger("nexo.autonomy")
RESERVE_TIMEOUT_S = 10.0

Ended = Literal[
    "answered", "idle", "preempted", "paused", "limit", "budget", "failed", "cancelled", "shutdown"
]


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
    """The checks before every model call of the turn (the loop's CallGuard).

    A call that passes them has its spend bound written to the ledger before it is sent, so a crash
    before its turn entry still counts it when the budgets are rebuilt at the next start.
    """

    def __init__(
        self,
        intake: Intake,
        enabled: Any,
        cycle: Cycle,
        spend: SpendTracker,
        scopes: Scopes,
        model: str,
        *,
        source: str,
        provider_max_tokens: int,
        stopping: Callable[[], bool],
    ) -> None:
        self.intake = intake
        self.stopping = stopping
        self.enabled = enabled
        self.cycle = cycle
        self.spend = spend
        self.scopes = scopes
        self.model = model
        self.source = source
        self.provider_max_tokens = provider_max_tokens
        self.budget: BudgetHit | None = None
        self.stop: str | None = None
        self.calls = 0
        self.used = Usage()

    async def before_call(self, call: PendingCall) -> str | None:
        if self.stopping():
            self.stop = "shutdown"
        elif not self.enabled():
            self.stop = "autonomy_paused"
        elif self.intake.busy:
            self.stop = "preempted"
        elif (hit := self.cycle.check_hour()) is not None:
            self.stop = hit.axis
        else:
            bound = estimate_call(call, provider_max_tokens=self.provider_max_tokens)
            try:
                self.budget = self.spend.check(self.scopes, self.model, next_call=bound)
            except PriceMissing as exc:
                logger.error("%s", exc)
                self.stop = "price_missing"
                return self.stop
            if self.budget is not None:
                self.stop = self.budget.axis
            elif not await self._reserve(bound):
                self.stop = "ledger_unavailable"
        return self.stop

    async def _reserve(self, bound: Usage) -> bool:
        """Write the spend bound of the next call to the ledger; False when it could not be stored."""
        sink = self.intake.sink
        if sink.connection is None:
            return True
        body = SpendReservedBody(
            index=self.calls + 1,
            input_tokens=self.used.input_tokens + bound.input_tokens,
            output_tokens=self.used.output_tokens + bound.output_tokens,
            model=self.model[:500],
        )
        agent = self.intake.agent.id
        sink.record(
            EntryDraft.of(
                body, source=self.source, agent=agent, goal_id=self.scopes.goal, subject="spend reserved"
            )
        )
        if await sink.flush(RESERVE_TIMEOUT_S):
            return True
        logger.error(
            "unattended model call of %s not made: its spend could not be recorded in the audit ledger "
            "within %g s (see `nexo status`)",
            agent,
            RESERVE_TIMEOUT_S,
        )
        return False

    def after_call(self, usage: Usage) -> None:
        self.calls += 1
        self.used = self.used + usage
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


def charged_model(intake: Intake) -> str:
    """``provider/model``: what an agent's calls are priced and recorded as (the price table's key)."""
    provider = intake.agent.model.provider
    return f"{provider}/{intake.config.llm.providers[provider].model}"


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
        if guard.stop == "shutdown":
            return "shutdown"
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
    stopping: Callable[[], bool] = lambda: False,
) -> TurnReport:
    """Run one unattended goal for ``intake``'s agent; ``scopes_for(goal_id)`` names its spend scopes."""
    agent = intake.agent
    model = charged_model(intake)
    provider_config = intake.config.llm.providers[agent.model.provider]
    goal = await intake.goals.start(
        agent=agent.id,
        kind="daemon",
        origin=origin or Origin(source=source),
        prompt=prompt,
        goal_id=goal_id,
    )
    scopes: Scopes = scopes_for(goal.id)
    guard = _Guard(
        intake,
        enabled,
        cycle,
        spend,
        scopes,
        model,
        source=source,
        provider_max_tokens=provider_config.max_tokens,
        stopping=stopping,
    )
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
