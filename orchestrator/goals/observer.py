"""What the reasoning loop reports per turn and per tool call, written to the audit ledger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.goals.sink import AuditSink
from orchestrator.goals.tracker import GoalTracker, TrackedGoal
from orchestrator.llm import Usage
from orchestrator.metrics import Metrics
from shared.protocol.audit.bodies import ToolCallBody, TurnBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Budget
from shared.protocol.audit.terms import ToolOutcome


class LedgerObserver:
    """One goal's observer: a ``turn`` entry per model call, a ``tool_call`` entry per call, and
    the matching metrics when ``metrics`` is given."""

    def __init__(
        self,
        sink: AuditSink,
        tracker: GoalTracker,
        goal: TrackedGoal,
        source: str,
        metrics: Metrics | None = None,
        *,
        model: str | None = None,
        unattended: bool = False,
    ) -> None:
        self.sink = sink
        self.tracker = tracker
        self.goal = goal
        self.source = source
        self.metrics = metrics
        self.model = model
        self.unattended = unattended

    async def on_turn(
        self, index: int, outcome: str, decision: str, usage: Usage, tool_calls: int, duration_s: float
    ) -> None:
        body = TurnBody(
            index=index,
            outcome=outcome,
            decision=decision[:4000],
            tool_calls=tool_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            duration_ms=round(duration_s * 1000, 3),
            model=self.model[:500] if self.model else None,
            unattended=self.unattended,
        )
        self.sink.record(
            EntryDraft.of(
                body, source=self.source, agent=self.goal.agent, goal_id=self.goal.id, subject=f"turn {index}"
            )
        )
        if self.metrics is not None:
            self.metrics.turn(self.goal.agent, self.source, outcome, duration_s)
        self.tracker.note(
            self.goal,
            phase=f"turn {index}",
            last_event=f"turn {index}: {outcome}",
            last_decision=decision[:300],
            budget=Budget(turns=index, tokens=usage.total),
        )

    async def on_tool(
        self,
        call_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        duration_s: float,
        outcome: ToolOutcome,
        error: str | None,
    ) -> None:
        body = ToolCallBody(
            tool=tool,
            args_sha256=args_digest(arguments),
            duration_ms=round(duration_s * 1000, 3),
            outcome=outcome,
            call_id=call_id[:200] or None,
            error=error[:4000] if error else None,
        )
        self.sink.record(
            EntryDraft.of(body, source=self.source, agent=self.goal.agent, goal_id=self.goal.id, subject=tool)
        )
        if self.metrics is not None:
            self.metrics.tool(self.goal.agent, tool, outcome, duration_s)
