"""Pushed channel messages and Claude Code verdicts, from the servers to the intakes."""

from __future__ import annotations

import logging

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import BaseModel

from orchestrator.intake import Intake
from orchestrator.mesh import Mesh
from orchestrator.metrics import Metrics
from shared.protocol.channel import (
    NAMESPACES,
    ChannelParams,
    PermissionVerdictParams,
    channel_method,
    permission_verdict_method,
)

logger = logging.getLogger("nexo.daemon")
PUSH_QUEUE = 1000
Pushed = ChannelParams | PermissionVerdictParams
PUSHED_NOTIFICATIONS: dict[str, type[BaseModel]] = {
    **{channel_method(ns): ChannelParams for ns in NAMESPACES},
    # nexo's own verdicts come through the event log, which names who answered.
    permission_verdict_method("claude"): PermissionVerdictParams,
}
"""The notifications the mesh parses and hands to :meth:`PushQueue.on_push`."""


class PushQueue:
    """Pushes queued from the moment a server connects: a Claude Code channel may push before the
    intakes listen, and its push is the message's only copy."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._pushes: MemoryObjectSendStream[tuple[str, Pushed]] | None = None

    def open(
        self,
    ) -> tuple[MemoryObjectSendStream[tuple[str, Pushed]], MemoryObjectReceiveStream[tuple[str, Pushed]]]:
        """The queue's two ends, for the caller to close; pushes are queued from now on."""
        pushes, pending = anyio.create_memory_object_stream[tuple[str, Pushed]](PUSH_QUEUE)
        self._pushes = pushes
        return pushes, pending

    async def on_push(self, server: str, method: str, params: BaseModel) -> None:
        if not isinstance(params, ChannelParams | PermissionVerdictParams) or self._pushes is None:
            return
        try:
            self._pushes.send_nowait((server, params))
        except anyio.WouldBlock:
            self._metrics.pushes_skipped.labels(server, "queue_full").inc()
            logger.error(
                "a %s pushed by %s was dropped: %d pushes are already waiting for the intake",
                "message" if isinstance(params, ChannelParams) else "verdict",
                server,
                PUSH_QUEUE,
                extra={"server": server},
            )


async def deliver_pushes(
    pushes: MemoryObjectReceiveStream[tuple[str, Pushed]], intakes: list[Intake], mesh: Mesh, metrics: Metrics
) -> None:
    """Hand queued pushes to the intakes (which take them only from Claude Code channels)."""
    async with pushes:
        async for server, params in pushes:
            bound = [intake for intake in intakes if server in intake.agent.channels]
            # A nexo channel's push is a hint: its message stays in the server's own log.
            if not bound and not mesh[server].has_capability("nexo/channel"):
                metrics.pushes_skipped.labels(server, "unbound").inc()
                logger.warning(
                    "a push from %s was not handled: no agent lists it in its channels",
                    server,
                    extra={"server": server},
                )
            for intake in bound:
                if isinstance(params, ChannelParams):
                    await intake.pushed(server, params)
                else:
                    await intake.claude_verdict(server, params)
