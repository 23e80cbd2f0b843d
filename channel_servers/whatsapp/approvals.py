"""Permission prompts on WhatsApp: two reply buttons to each approval number.

A prompt goes to the wa_ids in ``approval_numbers`` only (the channel cannot see who is paired; the
orchestrator still decides whose answer counts). Inside a number's 24-hour window it is an
interactive message with Approve / Deny buttons (ids ``nexo:allow:<id>`` / ``nexo:deny:<id>``);
outside it, the ``notice_template`` carries the prompt and the answer is typed (``yes <id>``).
WhatsApp cannot edit a sent message, so when the prompt is settled a short follow-up says so.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Final, Literal

from channel_servers.whatsapp.api import ApiError, ApiUnreachable, CloudApi
from channel_servers.whatsapp.outbound import Sender
from channel_servers.whatsapp.settings import WhatsAppSettings
from shared.channelkit.buttons import ButtonPrompts
from shared.channelkit.prompts import PromptClosed
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.whatsapp")

BUTTON_ID: Final = re.compile(r"^nexo:(allow|deny):([a-km-z]{5})$")
BODY_LIMIT: Final = 1024
"""An interactive message's body text is at most 1024 characters."""


@dataclass(frozen=True, slots=True)
class Press:
    request_id: str
    behavior: Literal["allow", "deny"]


def parse_button(button_id: str) -> Press | None:
    match = BUTTON_ID.fullmatch(button_id)
    if match is None:
        return None
    return Press(request_id=match.group(2), behavior="allow" if match.group(1) == "allow" else "deny")


def prompt_text(params: PermissionRequestParams) -> str:
    tail = f"\n\nOr reply yes {params.request_id} / no {params.request_id}."
    text = f"nexo asks to run *{params.tool_name}*: {params.description}\n\n{params.input_preview}"
    if len(text) + len(tail) > BODY_LIMIT:
        text = text[: BODY_LIMIT - len(tail) - 1] + "…"
    return text + tail


OUTCOME_WORDS: Final = {
    "allowed": "Approved",
    "denied": "Denied",
    "expired": "Expired",
    "cancelled": "Cancelled",
}


def closed_text(request_id: str, outcome: str, decided_by: str | None) -> str:
    word = OUTCOME_WORDS.get(outcome, outcome.capitalize() or "Settled")
    by = f" by {decided_by}" if decided_by and outcome in ("allowed", "denied") else ""
    return f"{word}{by} ({request_id})."


class Approvals:
    def __init__(self, api: CloudApi, sender: Sender, settings: WhatsAppSettings) -> None:
        self._api = api
        self._sender = sender
        self._settings = settings
        self.prompts = ButtonPrompts(
            settings.approval_numbers,
            self._post,
            self._update,
            logger=logger,
            unconfigured="set NEXO_WHATSAPP_APPROVAL_NUMBERS to your number to approve from WhatsApp",
            failures=(ApiError, ApiUnreachable),
        )

    async def _post(self, number: str, params: PermissionRequestParams) -> str | None:
        """Buttons inside the number's 24-hour window, the notice template outside it."""
        if await self._sender.inside_window(number):
            buttons = [
                (f"nexo:allow:{params.request_id}", "Approve"),
                (f"nexo:deny:{params.request_id}", "Deny"),
            ]
            return await self._api.buttons(number, prompt_text(params), buttons)
        if self._settings.notice_template is not None:
            return await self._api.template(
                number,
                self._settings.notice_template,
                self._settings.notice_template_language,
                " ".join(prompt_text(params).split()),
            )
        logger.warning(
            "approval number %s is outside the 24-hour window and no notice template is set: "
            "prompt %s not shown there",
            number,
            params.request_id,
        )
        return None

    async def _update(self, number: str, message_id: str, closed: PromptClosed) -> None:
        """A sent message cannot be edited: a follow-up says how the prompt ended."""
        await self._api.text(number, closed_text(closed.request_id, closed.outcome or "", closed.decided_by))
