"""The bookkeeping of one answered message, run by the session's follow-ups once the reply is out:
the transcript write and the acknowledgement (bounded, never lost to a shutdown), then waiting out
a channel server that was away for the acknowledgement, and the memory extraction (best effort).
The goal's end in the registry (``finish_goal``) goes out beside the reply itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from orchestrator.goals import LedgerObserver, TrackedGoal
from orchestrator.loop import GoalResult, Outcome
from orchestrator.loop.extract import remember_from_turn
from orchestrator.mesh import ServerConnection
from shared.protocol.events import Event

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake

FINISH_TIMEOUT_S = 2.0
RECORD_TIMEOUT_S = 15.0
"""Bound on the transcript write, and on one ack attempt, once a reply went out."""


async def finish_goal(
    intake: Intake,
    goal: TrackedGoal,
    result: GoalResult | None,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The goal's end in the registry, bounded and shielded: a cancelled goal ends as cancelled.
    Started with ``TaskGroup.start``, it reports started once shielded, before any work."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(FINISH_TIMEOUT_S):
        task_status.started()
        await anyio.lowlevel.cancel_shielded_checkpoint()  # the starter (the reply) goes first
        if result is not None:
            await intake.goals.finish(goal, result)
        else:
            await intake.goals.finish(
                goal, None, status="cancelled", outcome=goal.cancel_reason or "shutdown"
            )


@dataclass(eq=False)
class ReplyBookkeeping:
    intake: Intake
    connection: ServerConnection
    event: Event
    session_key: str
    prompt: str
    """The message as the model saw it: the user side of the transcript."""
    question: str
    """The message's own text, for the extraction."""
    answer: str
    goal: TrackedGoal
    result: GoalResult | None
    source: str
    done: Callable[[], None]
    acked: bool = False

    async def settle(self) -> None:
        intake = self.intake
        with anyio.move_on_after(RECORD_TIMEOUT_S):
            turn_id = f"{self.connection.name}:{self.event.dedupe_key}"
            await intake.sessions.store(self.session_key, self.prompt, self.answer, turn_id=turn_id)
        with anyio.move_on_after(RECORD_TIMEOUT_S):
            self.acked = await intake.pumps.try_ack(self.connection, self.event)
        if self.acked:
            intake.handled += 1

    async def rest(self) -> None:
        intake = self.intake
        if not self.acked:
            await intake.pumps.ack(self.connection, self.event)
            self.acked = True
            intake.handled += 1
        result = self.result
        if result is None or not intake.agent.memory.extract or result.outcome is not Outcome.DONE:
            return
        # Best effort after the ack: a shutdown here costs one extraction, never a second answer.
        await remember_from_turn(
            intake.mesh.get(intake.agent.memory.server),
            intake.agent,
            intake.provider,
            self.question,
            self.answer,
            result,
            observer=LedgerObserver(intake.sink, intake.goals, self.goal, self.source, intake.metrics),
            metrics=intake.metrics,
        )

    def close(self) -> None:
        self.done()
