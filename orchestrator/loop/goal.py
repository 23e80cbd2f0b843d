"""One goal: turns until the model answers or a budget, an error streak or a cancel stops it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from orchestrator.llm import (
    AssistantMessage,
    LLMError,
    Message,
    Provider,
    ProviderUnavailable,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from orchestrator.loop.arguments import argument_problems
from orchestrator.loop.tools import Gate, ToolObserver, ToolOutcome, ToolRunner
from orchestrator.mesh import Catalog

if TYPE_CHECKING:
    from orchestrator.config.agents import Budgets

logger = logging.getLogger("nexo.loop")


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"
    BUDGET_EXHAUSTED = "budget_exhausted"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class TurnTiming:
    total_s: float
    model_s: float

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.total_s - self.model_s)


@dataclass
class GoalResult:
    outcome: Outcome
    text: str | None = None
    axis: str | None = None
    """The budget that ran out (turns, wall_time, tokens) when the outcome is budget_exhausted."""
    error: str | None = None
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    timings: list[TurnTiming] = field(default_factory=list)
    transcript: list[Message] = field(default_factory=list)

    def summary(self) -> str:
        detail = f" ({self.axis})" if self.axis else ""
        error = f": {self.error}" if self.error else ""
        return (
            f"{self.outcome.value}{detail}{error}; {self.turns} turns, {self.tool_calls} tool calls, "
            f"{self.usage.input_tokens}+{self.usage.output_tokens} tokens"
        )

    def report(self) -> dict[str, Any]:
        """The outcome as ``nexo agent run --json`` prints it."""
        return {
            "outcome": self.outcome.value,
            "axis": self.axis,
            "error": self.error,
            "text": self.text,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "usage": {"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens},
        }


Progress = Callable[[str], Awaitable[None]]


class Observer(ToolObserver, Protocol):
    """Told about every turn and tool call (the audit ledger listens here)."""

    async def on_turn(
        self, index: int, outcome: str, decision: str, usage: Usage, tool_calls: int, duration_s: float
    ) -> None: ...


class _NoObserver:
    async def on_turn(
        self, index: int, outcome: str, decision: str, usage: Usage, tool_calls: int, duration_s: float
    ) -> None:
        return None

    async def on_tool(
        self,
        call_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        duration_s: float,
        outcome: Literal["ok", "error", "denied"],
        error: str | None,
    ) -> None:
        return None


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A model call about to be sent, as the guard sees it before it goes out."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    max_tokens: int | None
    """The output cap the call is sent with; None: the provider's own."""


class CallGuard(Protocol):
    """Hard limits outside the goal's own budgets (spend per day, per heartbeat, per cron entry)."""

    async def before_call(self, call: PendingCall) -> str | None:
        """The limit that stops the goal before ``call`` is sent, or None to send it."""
        ...

    def after_call(self, usage: Usage) -> None:
        """What the call just made cost."""
        ...


async def _quiet(_: str) -> None:
    return None


@dataclass
class _Run:
    budgets: Budgets
    started: float
    result: GoalResult
    observer: Observer
    clock: Callable[[], float]
    failures: int = 0
    guard: CallGuard | None = None


async def run_goal(
    *,
    provider: Provider,
    system: str,
    prompt: str,
    catalog: Catalog,
    runner: ToolRunner,
    gate: Gate,
    budgets: Budgets,
    history: Sequence[Message] = (),
    max_tokens: int | None = None,
    progress: Progress = _quiet,
    observer: Observer | None = None,
    clock: Callable[[], float] = time.monotonic,
    guard: CallGuard | None = None,
) -> GoalResult:
    """Run one goal to an explicit outcome. Provider outages come back as PROVIDER_UNAVAILABLE."""
    messages: list[Message] = [*history, UserMessage(prompt)]
    run = _Run(
        budgets=budgets,
        started=clock(),
        result=GoalResult(outcome=Outcome.DONE),
        observer=observer or _NoObserver(),
        clock=clock,
        guard=guard,
    )
    result = run.result
    try:
        with anyio.move_on_after(budgets.max_wall_s) as wall:
            await _turns(run, provider, system, messages, catalog, runner, gate, max_tokens, progress, clock)
        if wall.cancelled_caught:
            result.outcome, result.axis = Outcome.BUDGET_EXHAUSTED, "wall_time"
    except anyio.get_cancelled_exc_class():
        result.outcome = Outcome.CANCELLED
        raise
    except ProviderUnavailable as exc:
        result.outcome, result.error = Outcome.PROVIDER_UNAVAILABLE, str(exc)
    except LLMError as exc:
        result.outcome, result.error = Outcome.FAILED, str(exc)
    result.transcript = messages
    logger.info("goal ended: %s", result.summary())
    return result


async def _turns(
    run: _Run,
    provider: Provider,
    system: str,
    messages: list[Message],
    catalog: Catalog,
    runner: ToolRunner,
    gate: Gate,
    max_tokens: int | None,
    progress: Progress,
    clock: Callable[[], float],
) -> None:
    result, budgets = run.result, run.budgets
    while True:
        if result.turns >= budgets.max_turns:
            result.outcome, result.axis = Outcome.BUDGET_EXHAUSTED, "turns"
            return
        if result.usage.total >= budgets.max_tokens:
            result.outcome, result.axis = Outcome.BUDGET_EXHAUSTED, "tokens"
            return
        # Read each turn: a catalog may load tools on demand during the goal.
        tools = [ToolSpec(t.qualified, t.description, t.input_schema) for t in catalog]
        stop = (
            await run.guard.before_call(PendingCall(system, messages, tools, max_tokens))
            if run.guard is not None
            else None
        )
        if stop is not None:
            result.outcome, result.axis = Outcome.BUDGET_EXHAUSTED, stop
            return
        turn_start = clock()
        result.turns += 1
        await progress(f"turn {result.turns}: asking {provider.describe()}")
        completion = await provider.complete(
            system=system, messages=messages, tools=tools, max_tokens=max_tokens
        )
        result.usage = result.usage + completion.usage
        if run.guard is not None:
            run.guard.after_call(completion.usage)
        messages.append(AssistantMessage(completion.text, completion.tool_calls))
        if not completion.tool_calls:
            result.outcome, result.text = Outcome.DONE, completion.text or ""
            result.timings.append(TurnTiming(clock() - turn_start, completion.elapsed_s))
            await run.observer.on_turn(
                result.turns, "answered", completion.text or "", result.usage, 0, clock() - turn_start
            )
            return
        for call in completion.tool_calls:
            outcome = await _call(call, catalog, runner, gate, progress, run)
            result.tool_calls += 1
            messages.append(ToolResultMessage(call.id, outcome.content, outcome.is_error))
            run.failures = run.failures + 1 if outcome.is_error else 0
        result.timings.append(TurnTiming(clock() - turn_start, completion.elapsed_s))
        decision = ", ".join(call.name for call in completion.tool_calls)
        await run.observer.on_turn(
            result.turns,
            "tool_calls",
            decision,
            result.usage,
            len(completion.tool_calls),
            clock() - turn_start,
        )
        if run.failures >= budgets.max_consecutive_tool_failures:
            result.outcome = Outcome.FAILED
            result.error = f"{run.failures} tool calls failed in a row; last: {messages[-1].content[:300]}"  # type: ignore[union-attr]
            return


async def _call(
    call: ToolCall, catalog: Catalog, runner: ToolRunner, gate: Gate, progress: Progress, run: _Run
) -> ToolOutcome:
    started = run.clock()
    tool = catalog.get(call.name)
    if tool is None:
        names = ", ".join(catalog.names()) or "(none)"
        message = f"unknown tool {call.name!r}; the tools available are: {names}"
        await run.observer.on_tool(call.id, call.name, call.arguments, 0.0, "error", message)
        return ToolOutcome(message, is_error=True)
    problems = argument_problems(tool, call.arguments) or runner.refusal(tool, call.arguments)
    if problems is not None:
        await progress(f"  {tool.qualified}: invalid arguments, not run")
        await run.observer.on_tool(call.id, tool.qualified, call.arguments, 0.0, "error", problems[:500])
        return ToolOutcome(problems, is_error=True)
    decision = await gate.check(tool, call.arguments, call.id)
    if not decision.allowed:
        await progress(f"  {tool.qualified}: denied ({decision.reason})")
        await run.observer.on_tool(
            call.id, tool.qualified, call.arguments, run.clock() - started, "denied", decision.reason
        )
        return ToolOutcome(f"not run: {decision.reason}", is_error=True)
    await progress(f"  {tool.qualified} {json.dumps(call.arguments, ensure_ascii=False)[:120]}")
    begun = run.clock()
    outcome = await runner.run(tool, call.arguments)
    elapsed = run.clock() - begun
    if outcome.is_error:
        logger.info(
            "tool %s failed: %s", tool.qualified, outcome.content[:200], extra={"tool": tool.qualified}
        )
        await progress(f"  {tool.qualified} failed: {outcome.content[:200]}")
        await run.observer.on_tool(
            call.id, tool.qualified, call.arguments, elapsed, "error", outcome.content[:500]
        )
    else:
        await run.observer.on_tool(call.id, tool.qualified, call.arguments, elapsed, "ok", None)
    return outcome
