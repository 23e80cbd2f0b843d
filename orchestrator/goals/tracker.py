"""Goals in the audit server's registry: created when work starts, updated as it goes and ends.

The registry is the durable record (``nexo agent ps`` reads it with the daemon down). The
orchestrator also keeps each live goal's cancel scope here, so ``nexo agent cancel`` can stop it.
Without an audit server goals still get ids and can be cancelled; they are just not recorded.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from orchestrator.loop import GoalResult, Outcome
from orchestrator.mesh import ServerConnection
from orchestrator.metrics import Metrics
from shared.protocol.audit.goals import Budget, Goal, Origin
from shared.protocol.audit.methods import (
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
    GoalUpdateParams,
    GoalUpdateRequest,
    GoalUpdateResult,
)
from shared.protocol.audit.terms import GoalKind, GoalStatus

logger = logging.getLogger("nexo.goals")
CALL_TIMEOUT_S = 10.0
PROMPT_CHARS = 300

STATUS_OF: dict[Outcome, GoalStatus] = {
    Outcome.DONE: "done",
    Outcome.FAILED: "failed",
    Outcome.BUDGET_EXHAUSTED: "failed",
    Outcome.PROVIDER_UNAVAILABLE: "failed",
    Outcome.CANCELLED: "cancelled",
}


@dataclass
class TrackedGoal:
    id: str
    agent: str
    kind: GoalKind
    origin: Origin
    prompt: str
    started: float = field(default_factory=time.monotonic)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    admitted: anyio.Event = field(default_factory=anyio.Event)
    cancel_reason: str | None = None
    finished: anyio.Event = field(default_factory=anyio.Event)
    """Set once the goal ended and was recorded; ``result`` is then its outcome (None: it never ran)."""
    result: GoalResult | None = None
    progress: dict[str, object] = field(default_factory=dict)
    """The latest noted fields (phase, last event, budget so far), for whoever follows the goal live."""
    progressed: anyio.Event = field(default_factory=anyio.Event)
    """Set at the next note; a follower takes this event before waiting, then reads ``progress``."""


def budget_of(result: GoalResult, wall_s: float) -> Budget:
    return Budget(turns=result.turns, tokens=result.usage.total, wall_s=round(wall_s, 3))


class GoalTracker:
    def __init__(
        self,
        audit: ServerConnection | None,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.audit = audit
        self.metrics = metrics
        self.clock = clock
        self.live: dict[str, TrackedGoal] = {}
        self._progress: dict[str, dict[str, object]] = {}
        self._progress_ready = anyio.Event()
        self._emptied = anyio.Event()

    async def _call(self, request: GoalCreateRequest | GoalUpdateRequest, result: type) -> object | None:
        if self.audit is None:
            return None
        try:
            return await self.audit.request(request, result, timeout=CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 -- the work goes on; the registry misses this change
            logger.warning("goal registry: %s not recorded: %s", request.method, exc)
            return None

    async def start(
        self, *, agent: str, kind: GoalKind, origin: Origin, prompt: str, goal_id: str | None = None
    ) -> TrackedGoal:
        """Register the goal and wait for a slot under the global cap (queued goals wait here)."""
        goal = TrackedGoal(
            id=goal_id or f"g-{uuid.uuid4().hex[:12]}", agent=agent, kind=kind, origin=origin, prompt=prompt
        )
        self.live[goal.id] = goal
        created = await self._call(
            GoalCreateRequest(
                params=GoalCreateParams(
                    id=goal.id, agent=agent, kind=kind, origin=origin, prompt=prompt[:PROMPT_CHARS]
                )
            ),
            GoalCreateResult,
        )
        if isinstance(created, GoalCreateResult) and created.goal.status == "queued":
            logger.info("goal %s queued: the concurrency cap is reached", goal.id)
        else:
            goal.admitted.set()
        return goal

    async def wait_admitted(self, goal: TrackedGoal) -> None:
        await goal.admitted.wait()

    async def update(self, goal: TrackedGoal, **fields: object) -> None:
        params = GoalUpdateParams.model_validate({"id": goal.id, **fields})
        result = await self._call(GoalUpdateRequest(params=params), GoalUpdateResult)
        if isinstance(result, GoalUpdateResult):
            self._promote(result.promoted)

    def _promote(self, promoted: list[Goal]) -> None:
        for waiting in promoted:
            tracked = self.live.get(waiting.id)
            if tracked is not None:
                tracked.admitted.set()

    async def finish(
        self,
        goal: TrackedGoal,
        result: GoalResult | None,
        *,
        status: GoalStatus | None = None,
        outcome: str = "",
    ) -> None:
        self.forget(goal.id)
        goal.result = result
        wall = self.clock() - goal.started
        final: GoalStatus = status or (STATUS_OF[result.outcome] if result is not None else "failed")
        detail = outcome or (result.summary() if result is not None else "")
        fields: dict[str, object] = {"status": final, "outcome": detail[:1000]}
        if result is not None:
            fields["budget"] = budget_of(result, wall)
            fields["last_decision"] = (result.text or result.error or "")[:300]
        logger.info(
            "goal %s %s: %s", goal.id, final, detail[:200], extra={"agent": goal.agent, "goal": goal.id}
        )
        if self.metrics is not None:
            self.metrics.goals.labels(goal.agent, goal.kind, final).inc()
            if result is not None:
                self.metrics.usage(goal.agent, result.usage)
        await self.update(goal, **fields)
        goal.finished.set()

    def forget(self, goal_id: str) -> None:
        """The goal no longer runs in this process."""
        self.live.pop(goal_id, None)
        if not self.live:
            self._emptied.set()

    async def wait_idle(self) -> None:
        """Until no goal runs in this process (a shutdown's drain waits here, bounded)."""
        while self.live:
            self._emptied = anyio.Event()
            await self._emptied.wait()

    def note(self, goal: TrackedGoal, **fields: object) -> None:
        """Progress (phase, last event, budget so far) sent in the background, latest value wins."""
        goal.progress.update(fields)
        goal.progressed.set()
        goal.progressed = anyio.Event()
        if self.audit is None:
            return
        self._progress.setdefault(goal.id, {}).update(fields)
        self._progress_ready.set()

    async def run(self) -> None:
        """Send noted progress until cancelled; never holds up a turn."""
        while True:
            await self._progress_ready.wait()
            self._progress_ready = anyio.Event()
            pending, self._progress = self._progress, {}
            for goal_id, fields in pending.items():
                tracked = self.live.get(goal_id)
                if tracked is not None:
                    await self.update(tracked, **fields)

    def cancel(self, goal_id: str, reason: str) -> bool:
        goal = self.live.get(goal_id)
        if goal is None:
            return False
        goal.cancel_reason = reason
        goal.scope.cancel()
        goal.admitted.set()  # a queued goal leaves the queue to end as cancelled
        return True
