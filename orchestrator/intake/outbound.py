"""Replies through a channel server's outbound tool, idempotent where the server supports it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import anyio

from orchestrator.config.nexo import NexoConfig
from orchestrator.goals import AuditSink
from orchestrator.intake.chats import scope_of
from orchestrator.mesh import Mesh, ServerConnection, ServerUnavailable
from shared.protocol.audit.bodies import ChannelBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.sources import channel_source

logger = logging.getLogger("nexo.intake")


QuotePolicy = Literal["always", "groups", "never"]


class ReplySender:
    def __init__(
        self, connection: ServerConnection, tool_name: str, *, quote: QuotePolicy | None = None
    ) -> None:
        self.connection = connection
        self.tool_name = tool_name
        self._quote = quote

    def quotes(self, meta: Mapping[str, str]) -> bool:
        """Whether an answer to ``meta`` names the message it answers (``reply_to``).

        A nexo channel's ``reply_to`` says which message is answered and the server decides how to
        show it; a Claude Code channel's is a visible quote, which its plugins ask for only when
        answering an earlier message, so by default those quote only in groups, where answers to
        several people interleave.
        """
        nexo = self.connection.has_capability("nexo/channel")
        policy = self._quote or ("always" if nexo else "groups")
        if policy == "groups":
            return scope_of(meta, infer=not nexo) == "group"
        return policy == "always"

    def _properties(self) -> set[str]:
        for tool in self.connection.tools:
            if tool.name == self.tool_name:
                return set((tool.input_schema or {}).get("properties", {}))
        return set()

    async def send(
        self, meta: Mapping[str, str], text: str, *, idempotency_key: str, notice: bool = False
    ) -> None:
        """Raise on failure so the inbound event stays unacknowledged and is retried."""
        wanted: dict[str, Any] = {
            "text": text,
            "chat_id": meta.get("chat_id"),
            "reply_to": meta.get("message_id") if self.quotes(meta) else None,
            "idempotency_key": idempotency_key,
            "notice": notice,
        }
        await self.call(wanted)

    async def call(self, wanted: Mapping[str, Any]) -> str:
        """Call the outbound tool with the arguments its schema takes; the result's text."""
        accepted = self._properties()
        arguments = {k: v for k, v in wanted.items() if v is not None and (k in accepted or not accepted)}
        result = await self.connection.call_tool(self.tool_name, arguments)
        detail = " ".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise RuntimeError(f"{self.connection.name}.{self.tool_name} refused the reply: {detail}")
        return detail


def reply_sender(config: NexoConfig, connection: ServerConnection) -> ReplySender:
    """The sender of ``connection``'s replies, as its channel options say."""
    options = config.channel(connection.name)
    return ReplySender(connection, options.outbound_tool_name, quote=options.quote_replies)


async def notify(
    mesh: Mesh,
    config: NexoConfig,
    server: str,
    chat_id: str,
    text: str,
    *,
    key: str,
    notice: bool = True,
    sink: AuditSink | None = None,
    agent: str = "",
) -> None:
    """One message to one chat through a channel's configured outbound tool, once per ``key``.

    The one path for everything nexo says on its own (operator notices, boot and shutdown notices,
    autonomous answers, the model's notify tools). With a ``sink`` the delivery (or its failure) is
    a ``channel out`` entry in the ledger, as the answer to a message is. Raises ServerUnavailable
    when the channel is not configured, and whatever the send raises; callers decide whether that
    is a log line or a tool error.
    """
    status = "failed"
    try:
        connection = mesh.get(server)
        if connection is None:
            raise ServerUnavailable(f"no channel server {server!r} is configured")
        sender = reply_sender(config, connection)
        await sender.send({"chat_id": chat_id}, text, idempotency_key=key, notice=notice)
        status = "sent"
    finally:
        if sink is not None:
            body = ChannelBody(direction="out", chat_id=chat_id[:200], status=status, chars=len(text))
            sink.record(
                EntryDraft.of(
                    body, source=channel_source(server), agent=agent, subject=f"out {chat_id}"[:500]
                )
            )


RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 60.0


async def send_patiently(
    sender: ReplySender, meta: Mapping[str, str], text: str, *, key: str, notice: bool, agent: str
) -> None:
    """Send, waiting out an unavailable channel server with backoff (the outbox key stops doubles)."""
    delay = RETRY_INITIAL_S
    while True:
        try:
            await sender.send(meta, text, idempotency_key=key, notice=notice)
            return
        except ServerUnavailable as exc:
            logger.warning(
                "reply via %s deferred: %s",
                sender.connection.name,
                exc,
                extra={"server": sender.connection.name, "agent": agent},
            )
        await anyio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_S)
