"""One message's answer: its goal, then the reply, with the goal's end in the registry beside it and
the reply's bookkeeping handed to the session's follow-ups."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orchestrator.goals import TrackedGoal
from orchestrator.intake.admission import principal_of
from orchestrator.intake.bookkeeping import ReplyBookkeeping, finish_goal
from orchestrator.intake.goal_run import run_message_goal
from orchestrator.intake.outbound import ReplySender, reply_sender
from orchestrator.intake.session_queues import Session
from orchestrator.loop import GoalResult, Outcome
from orchestrator.mesh import ServerConnection
from orchestrator.permissions.policy import Standing
from orchestrator.proactive.digest import REPLIED
from shared.protocol.audit.goals import Origin
from shared.protocol.channel import ChannelParams, render_channel
from shared.protocol.events import Event

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake

logger = logging.getLogger("nexo.intake")


async def answer(
    intake: Intake, session: Session, connection: ServerConnection, event: Event, role: Standing
) -> None:
    params = ChannelParams.model_validate(event.payload)
    # The role comes from pairing, never from the channel: a sender_role in meta is overwritten,
    # and so is a principal, which only the channel's no_sender setting names.
    standing: dict[str, str] = {"sender_role": role}
    if role == "source":
        options = intake.config.channel(connection.name).pairing
        standing["principal"] = principal_of(connection.name, options, params.meta) or "-"
    prompt = render_channel(connection.name, params.content, {**params.meta, **standing})
    sender = reply_sender(intake.config, connection)
    source = f"channel:{connection.name}"
    chat_id = params.meta.get("chat_id") or "-"
    if role == "owner":
        digest = await intake.away.before_answer()
        if digest is not None:
            await intake.send(
                sender, params, digest, f"digest:{connection.name}:{event.dedupe_key}", notice=True
            )
    goal = await intake.goals.start(
        agent=intake.agent.id,
        kind="interactive",
        origin=Origin(source=source, session_key=session.key, chat_id=params.meta.get("chat_id")),
        prompt=params.content,
    )
    # After the registry's answer, so the marker's ledger write goes out beside the model call
    # instead of queueing in front of the registry write the turn waits for.
    intake.traffic(source, "in", chat_id, "received", params.meta.get("message_id"), len(params.content))
    result: GoalResult | None = None
    try:
        with goal.scope:
            await intake.goals.wait_admitted(goal)
            result = await run_message_goal(
                intake, session, sender, params, prompt, event, goal, source, role
            )
    except BaseException:
        await finish_goal(intake, goal, None)
        raise
    if result is None:
        # Cancelled by the operator (a shutdown propagates instead and leaves the message queued).
        text = f"[cancelled] {goal.cancel_reason or 'cancelled'} (goal {goal.id})"
    else:
        text = result.text if result.outcome is Outcome.DONE and result.text else _explain(result)
    text = intake.secret_guard.reply(
        text, server=connection.name, chat_id=params.meta.get("chat_id"), to_owner=role == "owner"
    )
    # The goal's work is done (a shutdown's drain no longer waits for it): its end in the registry
    # and the reply go out together, neither waiting for the other.
    intake.goals.forget(goal.id)
    bookkeeping = ReplyBookkeeping(
        intake,
        connection,
        event,
        session.key,
        prompt,
        params.content,
        text,
        goal,
        result,
        source,
        done=lambda: intake.in_flight.end((connection.name, event.dedupe_key)),
    )
    await _finish_and_send(intake, goal, result, sender, params, session, bookkeeping)


async def _finish_and_send(
    intake: Intake,
    goal: TrackedGoal,
    result: GoalResult | None,
    sender: ReplySender,
    params: ChannelParams,
    session: Session,
    bookkeeping: ReplyBookkeeping,
) -> None:
    # The goal's end in the registry waits for nothing the reply needs, and nothing waits for it:
    # it runs beside the reply in the intake's task group, shielded from the moment it starts,
    # while the reply takes this task's turn first.
    await intake.task_group.start(finish_goal, intake, goal, result)
    key = f"reply:{bookkeeping.connection.name}:{bookkeeping.event.dedupe_key}"
    await intake.send(sender, params, bookkeeping.answer, key)
    # The reply is out. No checkpoint from here on, so a shutdown cannot land before its
    # bookkeeping is queued: the next message of the session sees this exchange at once, and the
    # transcript write and the ack follow in order, never lost (followups.py).
    _replied(intake, session, bookkeeping, params.meta.get("chat_id") or "-")


def _replied(intake: Intake, session: Session, bookkeeping: ReplyBookkeeping, chat_id: str) -> None:
    source, text = bookkeeping.source, bookkeeping.answer
    logger.info(
        "answered %s on %s (%d characters)",
        bookkeeping.goal.id,
        source,
        len(text),
        extra={
            "agent": intake.agent.id,
            "goal": bookkeeping.goal.id,
            "server": bookkeeping.connection.name,
        },
    )
    intake.traffic(source, "out", chat_id, REPLIED, None, len(text))
    intake.sessions.remember(session.key, bookkeeping.prompt, text)
    session.follow_ups.add(bookkeeping)


def _explain(result: GoalResult) -> str:
    if result.outcome is Outcome.DONE:
        return "[nexo] (the model returned an empty answer)"
    return f"[nexo] I stopped without an answer: {result.summary()}"
