"""Notifications a server pushes (channel messages), claimed for the mesh's handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from mcp.client import ClientExtension, NotificationBinding
from pydantic import BaseModel

from shared.protocol.channel import channel_capability
from shared.protocol.channel_terms import PULLS_EVENTS

NotificationHandler = Callable[[str, str, BaseModel], Awaitable[None]]
"""(server name, method, params) for notifications a server pushes."""


class PushedNotifications(ClientExtension):
    """Claims the channel notifications a server pushes; the SDK drops unclaimed custom methods."""

    identifier = channel_capability("nexo")

    def __init__(
        self, server: str, methods: Mapping[str, type[BaseModel]], handler: NotificationHandler
    ) -> None:
        self._server = server
        self._methods = methods
        self._handler = handler

    def settings(self) -> dict[str, Any]:
        # The orchestrator pulls a nexo channel's messages and verdicts from its event log (the
        # message's durable copy): a nexo channel then pushes it neither. A Claude Code channel,
        # which has no log to pull, ignores the setting and pushes as before.
        return {PULLS_EVENTS: True}

    def notifications(self) -> Sequence[NotificationBinding[Any]]:
        return [self._binding(method, params) for method, params in self._methods.items()]

    def _binding(self, method: str, params: type[BaseModel]) -> NotificationBinding[Any]:
        async def deliver(value: BaseModel) -> None:
            await self._handler(self._server, method, value)

        return NotificationBinding(method=method, params_type=params, handler=deliver)
