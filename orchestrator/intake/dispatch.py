"""A pulled event's way in: an approval answer settles its request at once; a message passes pairing
and the channel's rate limit, then joins its session's queue. Malformed or unknown events cannot
succeed on a retry: they are set aside as dead letters at once, never dropped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from orchestrator.intake.chats import scope_of, sender_of
from orchestrator.intake.outbound import reply_sender
from orchestrator.mesh import ServerConnection, describe_error
from orchestrator.permissions import decider
from shared.protocol.channel import ChannelParams, PermissionVerdictParams, session_key
from shared.protocol.events import Event

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake


async def dispatch(intake: Intake, connection: ServerConnection, event: Event) -> None:
    marker = (connection.name, event.dedupe_key)
    if marker in intake.in_flight:
        return
    try:
        if event.kind == "permission_verdict":
            await _settle_verdict(intake, connection, event)
            return
        if event.kind != "message":
            raise ValueError(f"unknown event kind {event.kind!r} (expected message or permission_verdict)")
        params = ChannelParams.model_validate(event.payload)
    except ValueError as exc:
        await intake.notices.dead_letter(connection, event, describe_error(exc), 1)
        return
    admission = await intake.admissions.admit(connection, params, event_key=event.dedupe_key)
    if admission.verdict == "dead_letter":
        await intake.notices.dead_letter(connection, event, admission.reason, 1)
        return
    group = scope_of(params.meta, infer=True) == "group"
    intake.claude.saw_sender(connection, sender_of(params.meta), owner=admission.role == "owner", group=group)
    if admission.verdict == "handled":
        await intake.pumps.ack(connection, event)
        return
    role = admission.role or "contact"
    refuse = _refuser(intake, connection, event, params)
    if not await intake.rates.admit(connection.name, event.seq, refuse, role=role):
        return
    intake.in_flight.begin(marker)
    key = session_key(connection.name, params.meta, intake.agent.session_scope)
    session = intake.session_queues.open(key, intake.task_group)
    await session.inbox.send((connection.name, event, role))


async def _settle_verdict(intake: Intake, connection: ServerConnection, event: Event) -> None:
    """An approval answer: refused from a sender who may not answer, told when it came too late."""
    verdict = PermissionVerdictParams.model_validate(event.payload)
    sender = event.payload.get("sender")
    if not await _may_answer(intake, connection.name, sender):
        await intake.notices.refuse_verdict(
            connection.name, verdict.request_id, sender, event.payload.get("chat_id")
        )
    elif not intake.broker.resolve(
        verdict.request_id,
        verdict.behavior,
        f"channel:{connection.name}",
        decider(connection.name, sender, event.payload.get("sender_name")),
    ):
        await intake.notices.late_verdict(
            connection.name,
            verdict.request_id,
            intake.broker.settled(verdict.request_id),
            event.payload.get("chat_id"),
        )
    await intake.pumps.ack(connection, event)


async def _may_answer(intake: Intake, server: str, sender: object) -> bool:
    """Approval answers count from the channel's approvers, or by default from its owners."""
    approvers = intake.config.channel(server).approvers
    if approvers is not None:
        return sender in approvers
    return await intake.admissions.is_owner(server, sender)


def _refuser(
    intake: Intake, connection: ServerConnection, event: Event, params: ChannelParams
) -> Callable[[float, float], Awaitable[None]]:
    async def refuse(rate: float, wait_s: float) -> None:
        sender = reply_sender(intake.config, connection)
        text = (
            f"[rate limited] {connection.name} takes {rate:g} messages a minute; "
            f"this one was not handled. Send it again in {wait_s:.0f} s."
        )
        await intake.send(
            sender, params, text, f"ratelimit:{connection.name}:{event.dedupe_key}", notice=True
        )
        await intake.pumps.ack(connection, event)

    return refuse
