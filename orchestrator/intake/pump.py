"""One pump per bound channel server: apply the channel gate on each (re)connection, long-poll the
server's durable events, hand each to the intake, and acknowledge what the intake handled. Claude
Code channels (no event log) are taken from their pushed notifications instead: a push that arrives
before the gate has decided on its connection waits for that decision, and a push repeating a
(server, chat, message id) seen within the dedupe window is not answered again."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from orchestrator.config.agents import AgentConfig
from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.gate import GateResult, evaluate
from orchestrator.intake.notices import PUSHED
from orchestrator.intake.seen import SeenPushes
from orchestrator.mesh import Mesh, ServerConnection
from orchestrator.mesh.events import pull_forever, try_ack
from shared.protocol.channel import ChannelParams
from shared.protocol.events import EVENTS_EXTENSION, Event

logger = logging.getLogger("nexo.intake")

PULL_BATCH = 50
GATE_WAIT_S = 60.0
"""How long a push waits for its channel's gate decision (the intake may still be starting)."""

Dispatch = Callable[[ServerConnection, Event], Awaitable[None]]
Skipped = Callable[[str, str], None]
"""Told (server, reason) of every pushed message not answered: the metrics counter."""


class ChannelPumps:
    def __init__(
        self,
        config: NexoConfig,
        agent: AgentConfig,
        mesh: Mesh,
        dispatch: Dispatch,
        *,
        seen: SeenPushes | None = None,
        skipped: Skipped | None = None,
    ) -> None:
        self.config = config
        self.agent = agent
        self.mesh = mesh
        self._dispatch = dispatch
        self._push_only: dict[str, bool] = {}
        self._taken: dict[str, bool] = {}
        self._decided: dict[str, anyio.Event] = {}
        self._pushes = 0
        self.seen = seen or SeenPushes()
        self._skipped = skipped or (lambda server, reason: None)

    def gate(self, connection: ServerConnection) -> GateResult:
        client = connection.client
        return evaluate(
            self.config,
            self.agent,
            connection.name,
            connection.capability_names() if client is not None else None,
            client.server_info.name if client is not None and client.server_info is not None else None,
        )

    def _registered(self, connection: ServerConnection) -> bool:
        """Apply the gate to a (re)connected server; a skip is logged once per connection."""
        result = self.gate(connection)
        if result.verdict != "register":
            logger.warning(
                "channel %s", result.line(), extra={"server": connection.name, "agent": self.agent.id}
            )
        return result.verdict == "register"

    async def run(self, connection: ServerConnection) -> None:
        async def on_connect() -> bool:
            registered = self._registered(connection)
            # A Claude Code channel (no pull) delivers by push only: nothing to pull until it reconnects.
            self._push_only[connection.name] = registered and not connection.has_capability(EVENTS_EXTENSION)
            self._taken[connection.name] = registered
            self._decision(connection.name).set()
            return registered and not self._push_only[connection.name]

        async def handle(event: Event) -> None:
            await self._dispatch(connection, event)

        await pull_forever(
            connection, handle, limit=PULL_BATCH, on_connect=on_connect, label=f"pump {connection.name}"
        )

    def _decision(self, server: str) -> anyio.Event:
        return self._decided.setdefault(server, anyio.Event())

    async def pushed(self, server: str, params: ChannelParams) -> None:
        """A message a Claude Code channel pushed: its only copy, with no id to acknowledge."""
        with anyio.move_on_after(GATE_WAIT_S):
            await self._decision(server).wait()
        if server not in self._push_only:
            self._skipped(server, "not_taken")
            logger.error(
                "a message pushed by %s was dropped: its channel was not taken within %.0f s "
                "(see `nexo channel doctor`)",
                server,
                GATE_WAIT_S,
                extra={"server": server, "agent": self.agent.id},
            )
            return
        if not self._push_only[server]:
            if not self._taken.get(server, False):
                self._skipped(server, "not_taken")  # skipped by the gate (its fix was logged at connect)
            return  # otherwise a nexo channel: the pull delivers the event
        self._pushes += 1
        message_id = params.meta.get("message_id")
        chat = params.meta.get("chat_id", "")
        if message_id and await self.seen.repeat((self.agent.id, server, chat, message_id)):
            self._skipped(server, "repeat")
            logger.info(
                "a repeated push of message %r in chat %r from %s was not answered again",
                message_id,
                chat,
                server,
                extra={"server": server, "agent": self.agent.id},
            )
            return
        key = f"{chat}:{message_id}" if message_id else f"{time.time_ns()}-{self._pushes}"
        event = Event(
            seq=PUSHED,
            kind="message",
            dedupe_key=f"push:{key}",
            payload=params.model_dump(mode="json"),
            created_at=time.time(),
        )
        await self._dispatch(self.mesh[server], event)

    async def try_ack(self, connection: ServerConnection, event: Event) -> bool:
        """One bounded attempt; False when the server is unavailable (the event stays in its log)."""
        # A pushed message has no id to acknowledge; the outbox key stops a second reply to a redelivery.
        return event.seq == PUSHED or await try_ack(connection, event)

    async def ack(self, connection: ServerConnection, event: Event) -> None:
        """Acknowledge, waiting for the server to come back as long as it takes."""
        while not await self.try_ack(connection, event):
            await connection.wait_ready(timeout=3600)
