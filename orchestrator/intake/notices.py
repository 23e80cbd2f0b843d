"""What the intake records and says on its own: traffic markers, notices, dead letters (messages set
aside in their server's log after repeated failures), and notices to the operator."""

from __future__ import annotations

import logging
from typing import Literal

import anyio

from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink
from orchestrator.intake.outbound import notify
from orchestrator.mesh import Mesh, ServerConnection
from orchestrator.metrics import Metrics
from shared.protocol.audit.bodies import ChannelBody, NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.events import DeadLetterParams, DeadLetterRequest, DeadLetterResult, Event

logger = logging.getLogger("nexo.intake")

PUSHED = -1
"""The sequence number of a pushed message: it came with no durable copy to acknowledge."""
OPERATOR_NOTICE_TIMEOUT_S = 30.0


class Notices:
    """What the intake records in the ledger and tells the operator on its own."""

    def __init__(
        self, config: NexoConfig, mesh: Mesh, agent: str, sink: AuditSink, metrics: Metrics | None = None
    ) -> None:
        self._config = config
        self._mesh = mesh
        self._agent = agent
        self._sink = sink
        self._metrics = metrics

    def record(
        self,
        level: Literal["info", "warning", "error"],
        message: str,
        *,
        source: str,
        subject: str,
        limit: str | None = None,
    ) -> None:
        self._sink.record(
            EntryDraft.of(
                NoticeBody(level=level, message=message[:4000], limit=limit),
                source=source,
                agent=self._agent,
                subject=subject[:500],
            )
        )

    async def tell_operator(self, text: str, *, key: str) -> None:
        """A notice to the operator's channel, once per key (the outbox drops a repeat)."""
        operator = self._config.operator
        try:
            with anyio.fail_after(OPERATOR_NOTICE_TIMEOUT_S):
                await notify(
                    self._mesh,
                    self._config,
                    operator.channel,
                    operator.chat_id,
                    text,
                    key=key,
                    sink=self._sink,
                    agent=self._agent,
                )
        except Exception as exc:  # noqa: BLE001 -- the log and the ledger still have it
            logger.warning("could not tell the operator (%s): %s", operator.channel, exc)
            return
        logger.info("told the operator on %s (%s)", operator.channel, key)

    def traffic(
        self,
        source: str,
        direction: Literal["in", "out"],
        chat_id: str,
        status: str,
        message_id: str | None,
        chars: int,
    ) -> None:
        """A channel traffic marker: never the message text."""
        body = ChannelBody(
            direction=direction, chat_id=chat_id[:200], status=status, message_id=message_id, chars=chars
        )
        self._sink.record(
            EntryDraft.of(body, source=source, agent=self._agent, subject=f"{direction} {chat_id}"[:500])
        )
        if self._metrics is not None:
            self._metrics.messages.labels(source.removeprefix("channel:"), direction).inc()

    async def refuse_verdict(self, server: str, request_id: str, sender: object, chat_id: object) -> None:
        """Record a refused approval answer and tell the chat it came from, so nobody waits on it."""
        message = f"approval answer for {request_id} from {sender!r} on {server} refused: not an approver"
        logger.warning(message, extra={"server": server, "agent": self._agent})
        self.record("warning", message, source=f"channel:{server}", subject=f"refused answer {request_id}")
        if not isinstance(chat_id, str) or not chat_id:
            return
        options = self._config.channel(server)
        if options.approvers is not None:
            who = f"only the senders in channel_options.{server}.approvers may answer approvals here"
            fix = f"add {sender!r} to that list in the config and restart `nexo run`"
        else:
            who = (
                "only the channel's owners (its pairing.allow_from and senders paired as owner) may "
                "answer approvals here"
            )
            fix = f"run `nexo pair seed {server} {options.pairing.account} {sender} --owner`"
        text = (
            f"[refused] your answer to approval {request_id} was not counted: sender {sender!r} is not an "
            f"approver on {server}; {who}. If you are the operator, {fix}, then answer again: the "
            "request stays open until an approver answers it or it expires."
        )
        await self._tell_chat(server, chat_id, text, f"refused:{server}:{request_id}:{sender}", "was refused")

    async def late_verdict(self, server: str, request_id: str, settled: str | None, chat_id: object) -> None:
        """Tell the chat an approval answer changed nothing: the request was already settled."""
        if not isinstance(chat_id, str) or not chat_id:
            return
        how = settled or "it is not waiting for an answer (nexo may have restarted since it asked)"
        text = f"[too late] your answer to approval {request_id} changed nothing: {how}."
        await self._tell_chat(server, chat_id, text, f"late:{server}:{request_id}:{chat_id}", "came too late")

    async def _tell_chat(self, server: str, chat_id: str, text: str, key: str, what: str) -> None:
        """One notice to the chat an approval answer came from (the log keeps it when that fails)."""
        try:
            with anyio.fail_after(OPERATOR_NOTICE_TIMEOUT_S):
                await notify(self._mesh, self._config, server, chat_id, text, key=key)
        except Exception as exc:  # noqa: BLE001 -- the log (and the ledger, for a refusal) still has it
            logger.warning("could not tell %s chat %r its answer %s: %s", server, chat_id, what, exc)

    async def dead_letter(
        self, connection: ServerConnection, event: Event, error: str, attempts: int
    ) -> None:
        """Move the event out of the pull (it stays for `nexo dlq`), record it, tell the operator."""
        reason = f"failed {attempts} times; last error: {error}"
        if event.seq != PUSHED:
            try:
                await connection.request(
                    DeadLetterRequest(params=DeadLetterParams(seq=event.seq, reason=reason)),
                    DeadLetterResult,
                    timeout=10,
                )
            except Exception as exc:  # noqa: BLE001 -- it stays unacknowledged and comes back later
                logger.error("could not set aside %s:%d: %s", connection.name, event.seq, exc)
                return
        where = f"{connection.name}:{event.seq}"
        logger.error(
            "dead letter %s: %s", where, reason, extra={"server": connection.name, "agent": self._agent}
        )
        self.record(
            "error",
            f"dead letter {where}: {reason}",
            source=f"channel:{connection.name}",
            subject=f"dead letter {where}",
            limit="max_attempts",
        )
        await self.tell_operator(
            f"[dead letter] a message from {connection.name} (event {event.seq}) failed {attempts} times and "
            f"was set aside: {error[:300]}. See `nexo dlq list`; `nexo dlq replay {where}` tries it again.",
            key=f"dlq:{where}:{event.dedupe_key}",
        )
