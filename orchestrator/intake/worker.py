"""A session's worker: each queued message answered in turn, a failure retried with backoff and one
that keeps failing set aside as a dead letter. Once a shutdown drains, a message not started yet
stays unacknowledged and is answered after the next start."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ObjectReceiveStream

from orchestrator.intake.answer import answer
from orchestrator.intake.goal_run import LeftForRestart
from orchestrator.intake.notices import PUSHED
from orchestrator.intake.session_queues import Inbound, Session
from orchestrator.mesh import ServerConnection, describe_error
from orchestrator.permissions.policy import Standing
from shared.protocol.events import Event

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake

logger = logging.getLogger("nexo.intake")


async def work(intake: Intake, session: Session, inbox: ObjectReceiveStream[Inbound]) -> None:
    async with inbox:
        async for server, event, role in inbox:
            handed_over = False
            try:
                if intake.draining and event.seq != PUSHED:
                    continue  # not started: unacknowledged, it is answered after the restart
                handed_over = await _handle(intake, session, intake.mesh[server], event, role)
            finally:
                if not handed_over:
                    intake.in_flight.end((server, event.dedupe_key))


async def _handle(
    intake: Intake, session: Session, connection: ServerConnection, event: Event, role: Standing
) -> bool:
    """Answer, retrying a failure with backoff; one that keeps failing becomes a dead letter.
    True when the reply went out and its bookkeeping, now the session's follow-ups', ends the
    message's time in flight."""
    options = intake.config.channel(connection.name)
    delay = options.retry_backoff_s
    for attempt in range(1, options.max_attempts + 1):
        try:
            await answer(intake, session, connection, event, role)
            return True
        except LeftForRestart as stopped:
            logger.info("message %s:%d is left for the next start: %s", connection.name, event.seq, stopped)
            return False
        except Exception as exc:  # noqa: BLE001 -- any failure of one message must not stop its channel
            error = describe_error(exc)
            logger.warning(
                "message %s:%d failed (attempt %d of %d): %s",
                connection.name,
                event.seq,
                attempt,
                options.max_attempts,
                error,
                extra={"server": connection.name, "agent": intake.agent.id},
            )
        if intake.draining and event.seq != PUSHED:
            # No retry while shutting down: unacknowledged, the message is answered after the start.
            logger.info(
                "message %s:%d is left for the next start: nexo is shutting down",
                connection.name,
                event.seq,
            )
            return False
        if attempt < options.max_attempts:
            await anyio.sleep(delay)
            delay *= 2
    await intake.notices.dead_letter(connection, event, error, options.max_attempts)
    return False
