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
from shared.channelkit.buttons import ButtonPrompts
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
        self.prompts = ButtonPrompts(
            chat_ids,
            self._post,
            self._update,
            logger=logger,
            unconfigured="set NEXO_TELEGRAM_APPROVAL_CHAT_IDS to your chat id to approve from Telegram",
        )

    async def _post(self, chat_id: str, params: PermissionRequestParams) -> str:
        sent = await self._sender.call(
            "sendMessage",
            {
                "chat_id": chat_id,
                "text": prompt_html(params),
                "parse_mode": "HTML",
                "reply_markup": keyboard(params.request_id),
            },
        )
        return str(sent["message_id"])

    async def _update(self, chat_id: str, message_id: str, closed: PromptClosed) -> None:
        outcome = OUTCOMES.get(closed.outcome or "", "closed")
        who = f" by {closed.decided_by}" if closed.decided_by else ""
        await self._sender.call(
            "editMessageText",
            {
                "chat_id": chat_id,
                "message_id": int(message_id),
                "text": f"Request <code>{closed.request_id}</code>: {html.escape(outcome + who)}.",
                "parse_mode": "HTML",
                "reply_markup": {"inline_keyboard": []},
            },
        )

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
