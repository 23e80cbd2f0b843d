"""A message's goal run: through the gate of its channel and its sender's standing, with its input
trusted as far as that standing goes, waiting out a provider outage (the chat is told once)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from orchestrator.goals import LedgerObserver, TrackedGoal
from orchestrator.intake.notices import PUSHED
from orchestrator.intake.outbound import ReplySender
from orchestrator.intake.session_queues import Session
from orchestrator.loop import GoalResult, Outcome, run_goal
from orchestrator.permissions import origin_line
from orchestrator.permissions.policy import Standing
from orchestrator.tools.local import GoalContext
from shared.protocol.channel import ChannelParams
from shared.protocol.events import Event
from shared.protocol.memory.meta import PROVENANCE_META_KEY, Provenance

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake

RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 60.0


class LeftForRestart(Exception):
    """A shutdown stopped a message's goal before it had an answer: unacknowledged, the message is
    answered after the next start."""


_PROVENANCE: dict[Standing, Provenance] = {
    "owner": "owner",
    "contact": "paired_contact",
    "source": "untrusted",
}
"""How far a goal's input is trusted: a source's payload is a third party's data."""


async def run_message_goal(
    intake: Intake,
    session: Session,
    sender: ReplySender,
    params: ChannelParams,
    prompt: str,
    event: Event,
    goal: TrackedGoal,
    source: str,
    role: Standing,
) -> GoalResult:
    """Run the goal, waiting out a provider outage (the chat is told once)."""
    delay = RETRY_INITIAL_S
    gate = intake.gate_for(sender.connection.name).for_principal(role)
    while True:
        result = await run_goal(
            provider=intake.provider,
            system=intake.system_for(sender.connection),
            prompt=prompt,
            catalog=gate.visible(intake.catalog()),
            runner=intake.runner.for_goal(
                intake.local,
                GoalContext(intake.agent.id, goal.id, sender.connection.name, dict(params.meta), role),
                meta={PROVENANCE_META_KEY: _PROVENANCE[role]},
            ),
            gate=gate.for_origin(origin_line(sender.connection.name, params.meta, role)),
            budgets=intake.agent.budgets,
            history=await intake.sessions.history(session.key),
            max_tokens=intake.agent.model.max_tokens,
            observer=LedgerObserver(intake.sink, intake.goals, goal, source, intake.metrics),
        )
        if intake.on_goal is not None:
            intake.on_goal(result)
        if result.outcome is not Outcome.PROVIDER_UNAVAILABLE:
            session.provider_notice_sent = False
            return result
        if not session.provider_notice_sent:
            session.provider_notice_sent = True
            text = (
                f"[nexo] I could not reach the model: {result.error} "
                "Your message is queued and will be answered when the provider is reachable."
            )
            await intake.send(
                sender, params, text, f"notice:{sender.connection.name}:{event.dedupe_key}", notice=True
            )
        intake.goals.note(goal, phase="waiting for the model", last_event=(result.error or "")[:300])
        with anyio.move_on_after(delay):
            await intake.drain_started.wait()
        if intake.draining and event.seq != PUSHED:
            # Waiting out an outage is not work in flight: a shutdown does not wait for the model.
            raise LeftForRestart("nexo shut down while the model was unreachable")
        delay = min(delay * 2, RETRY_MAX_S)
