"""Permission prompts as a message with Approve / Deny buttons in each of the operator's chats.

A press becomes the same answer as typing ``yes <id>`` / ``no <id>``, from the presser's user id:
the orchestrator decides whether that person may approve (its pairing and approvers), so a press by
anybody else is refused there and leaves the prompt open. Every press is answered
(``answerCallbackQuery``) so the phone's spinner stops.
"""

from __future__ import annotations

import html
import logging
from typing import Any

from channel_servers.telegram.outbound import Sender
from channel_servers.telegram.updates import Press, callback_data, parse_callback
from shared.channelkit import Channel, SendFailed, Unreachable
from shared.channelkit.prompts import PromptClosed
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.telegram")

OUTCOMES = {"allowed": "approved", "denied": "denied", "expired": "expired", "cancelled": "cancelled"}


def prompt_html(params: PermissionRequestParams) -> str:
    return (
        f"<b>Approve {html.escape(params.tool_name)}?</b>\n{html.escape(params.description)}\n"
        f"<pre>{html.escape(params.input_preview)}</pre>\n"
        f"Press a button, or reply <code>yes {params.request_id}</code> / "
        f"<code>no {params.request_id}</code>."
    )


def keyboard(request_id: str) -> dict[str, Any]:
    return {
        "inline_keyboard": [
            [
                {"text": "Approve", "callback_data": callback_data("allow", request_id)},
                {"text": "Deny", "callback_data": callback_data("deny", request_id)},
            ]
        ]
    }


class Approvals:
    def __init__(self, sender: Sender, channel: Channel, chat_ids: list[str]) -> None:
        self._sender = sender
        self._channel = channel
        self._chat_ids = chat_ids
        self.shown: dict[str, list[tuple[str, str]]] = {}
        """request id -> (chat id, message id) of each prompt message, to edit when it closes."""

    async def show(self, params: PermissionRequestParams) -> int:
        """Send the prompt to every approval chat; how many showed it (0: none configured or reached)."""
        if not self._chat_ids:
            logger.warning(
                "telegram: permission prompt %s not shown: set NEXO_TELEGRAM_APPROVAL_CHAT_IDS to your "
                "chat id to approve from Telegram",
                params.request_id,
            )
        shown: list[tuple[str, str]] = []
        for chat_id in self._chat_ids:
            try:
                sent = await self._sender.call(
                    "sendMessage",
                    {
                        "chat_id": chat_id,
                        "text": prompt_html(params),
                        "parse_mode": "HTML",
                        "reply_markup": keyboard(params.request_id),
                    },
                )
            except (SendFailed, Unreachable) as exc:
                logger.warning(
                    "telegram: prompt %s not shown in chat %s: %s", params.request_id, chat_id, exc
                )
                continue
            shown.append((chat_id, str(sent["message_id"])))
        self.shown[params.request_id] = shown
        return len(shown)

    async def pressed(self, press: Press) -> None:
        """Store the press as the presser's answer (once), then stop the button's spinner."""
        answer = parse_callback(press.data)
        note = None
        if answer is None:
            note = "This button is not nexo's."
        else:
            behavior, request_id = answer
            received = await self._channel.press(
                request_id,
                behavior,
                press.user_id,
                press.chat_id,
                f"press:{press.query_id}",
                sender_name=press.user_name,
            )
            if received.seq == 0:
                note = "This request is already closed."
        params: dict[str, Any] = {"callback_query_id": press.query_id}
        if note:
            params["text"] = note
        try:
            await self._sender.call("answerCallbackQuery", params)
        except (SendFailed, Unreachable) as exc:
            logger.info("telegram: press %s not answered: %s", press.query_id, exc)

    async def closed(self, closed: PromptClosed) -> None:
        """Edit each prompt message to say how it ended (and who decided) and remove its buttons."""
        request_id = closed.request_id
        outcome = OUTCOMES.get(closed.outcome or "", "closed")
        who = f" by {closed.decided_by}" if closed.decided_by else ""
        for chat_id, message_id in self.shown.pop(request_id, []):
            try:
                await self._sender.call(
                    "editMessageText",
                    {
                        "chat_id": chat_id,
                        "message_id": int(message_id),
                        "text": f"Request <code>{request_id}</code>: {html.escape(outcome + who)}.",
                        "parse_mode": "HTML",
                        "reply_markup": {"inline_keyboard": []},
                    },
                )
            except (SendFailed, Unreachable) as exc:
                logger.info("telegram: prompt %s in chat %s not edited: %s", request_id, chat_id, exc)
