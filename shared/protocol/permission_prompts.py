"""The permission prompt's requests between the orchestrator and a nexo channel, as wire models.

``nexo/channel/permission_request`` (the host asks a channel to show an approval prompt; the answer
says how many places showed it) and ``nexo/channel/permission_closed`` (the host settled it: show it
no more). Here, apart from the channel kit, so that the orchestrator reads them without importing
the kit (its outbox, files and media code, a server's share of the imports).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.protocol.channel import PermissionRequestParams
from shared.protocol.deferred import WireParams, WireRequest, WireResult

PERMISSION_REQUEST_METHOD = "nexo/channel/permission_request"

PERMISSION_CLOSED_METHOD = "nexo/channel/permission_closed"

PromptOutcome = Literal["allowed", "denied", "expired", "cancelled"]


class PermissionPrompt(WireParams):
    """The control-plane request form of the permission prompt (same fields as the notification)."""

    request_id: str
    tool_name: str
    description: str
    input_preview: str

    def as_params(self) -> PermissionRequestParams:
        return PermissionRequestParams(
            request_id=self.request_id,
            tool_name=self.tool_name,
            description=self.description,
            input_preview=self.input_preview,
        )


class PermissionRequestCall(WireRequest[PermissionPrompt, Literal["nexo/channel/permission_request"]]):
    method: Literal["nexo/channel/permission_request"] = "nexo/channel/permission_request"


class PermissionRequestAccepted(WireResult):
    delivered: int
    """0 means nobody saw the prompt (no operator connected): the orchestrator should not wait on us."""


class PermissionClosedParams(WireParams):
    """The host settled the prompt (answered anywhere, timed out or cancelled): show it no more.

    ``outcome`` and ``decided_by`` are absent from older hosts; older channels ignore them.
    """

    request_id: str
    outcome: PromptOutcome | None = None
    decided_by: str | None = Field(None, max_length=200)
    """Who decided, for display (``telegram:12345 (Ana)``, ``console``): never a secret."""


class PermissionClosedCall(WireRequest[PermissionClosedParams, Literal["nexo/channel/permission_closed"]]):
    method: Literal["nexo/channel/permission_closed"] = "nexo/channel/permission_closed"


class PermissionClosedResult(WireResult):
    closed: bool
    """False when the channel was not showing it (never asked here, or already expired)."""
