"""Approval prompts in Claude Code's contract: a notification out, a notification back.

A server that declares ``claude/channel/permission`` gets ``notifications/claude/channel/permission_request``
(request id, tool name, description, input preview) and answers with
``notifications/claude/channel/permission`` carrying only ``{request_id, behavior}``. No sender comes
with the answer: the server vouches for whoever gave it. nexo relays to such a server only when the
operator said its approvers are the operator (``channel_options.<server>.claude_permission_relay``).
A server speaking nexo's contract too is asked in nexo's, whose answers name their sender.
"""

from __future__ import annotations

from typing import cast

import mcp_types as types

from orchestrator.mesh import ServerConnection, ServerUnavailable
from shared.protocol.channel import ClaudePermissionRequestNotification, permission_capability
from shared.protocol.permission_prompts import PermissionPrompt

CLAUDE_PERMISSION = permission_capability("claude")
NEXO_PERMISSION = permission_capability("nexo")


def speaks_claude_relay_only(connection: ServerConnection) -> bool:
    """Declares Claude Code's permission relay and not nexo's (which is preferred when both are)."""
    return connection.has_capability(CLAUDE_PERMISSION) and not connection.has_capability(NEXO_PERMISSION)


class ClaudeRelay:
    """One Claude Code channel as the broker's relay: the prompt goes out as a notification."""

    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection

    @property
    def name(self) -> str:
        return self.connection.name

    async def show(self, prompt: PermissionPrompt) -> int:
        """Send the prompt; 1 (the server shows it to its approvers) or ServerUnavailable."""
        client = self.connection.client
        if client is None:
            raise ServerUnavailable(f"server {self.name!r} is not connected")
        note = ClaudePermissionRequestNotification(params=prompt.as_params())
        await client.session.send_notification(cast(types.ClientNotification, note))
        return 1


Relay = ServerConnection | ClaudeRelay
"""Where an approval prompt goes: a nexo channel (a request, answered with its sender) or a Claude one."""
