"""Permission prompts as a Block Kit message with Approve / Deny buttons in the operator's chats.

A press (a ``block_actions`` interaction, over Socket Mode or the signed interactivity URL) becomes
the same answer as typing ``yes <id>`` / ``no <id>``, from the presser's Slack user id: the
orchestrator decides whether that person may approve, so a press by anybody else is refused there
and leaves the prompt open. When the prompt is settled its messages are edited to say how it ended,
without buttons.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from channel_servers.slack.outbound import Sender
from shared.channelkit import Channel
from shared.channelkit.buttons import ButtonPrompts
from shared.channelkit.prompts import PromptClosed
from shared.channelkit.text import to_slack_mrkdwn
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.slack")

Behavior = Literal["allow", "deny"]
ACTIONS: dict[str, Behavior] = {"nexo_allow": "allow", "nexo_deny": "deny"}
OUTCOMES = {"allowed": "approved", "denied": "denied", "expired": "expired", "cancelled": "cancelled"}


@dataclass(frozen=True)
class Press:
    request_id: str
    behavior: Behavior
    user_id: str
    user_name: str
    chat_id: str
    dedupe_key: str


def parse_press(payload: dict[str, Any]) -> Press | None:
    """The button press in a ``block_actions`` payload, or ``None`` when it is not one of nexo's."""
    if payload.get("type") != "block_actions":
        return None
    user = payload.get("user") or {}
    channel = payload.get("channel") or {}
    actions = payload.get("actions") or []
    if not (
        isinstance(user, dict) and isinstance(channel, dict) and actions and isinstance(actions[0], dict)
    ):
        return None
    action = actions[0]
    behavior = ACTIONS.get(str(action.get("action_id")))
    user_id, request_id = user.get("id"), action.get("value")
    if behavior is None or not isinstance(user_id, str) or not isinstance(request_id, str):
        return None
    stamp = str(action.get("action_ts") or payload.get("trigger_id") or "")
    return Press(
        request_id,
        behavior,
        user_id,
        str(user.get("name") or user.get("username") or user_id),
        str(channel.get("id", "")),
        f"press:{user_id}:{stamp}",
    )


SECTION_LIMIT = 3000
"""Slack refuses a section block whose text is longer (``invalid_blocks``)."""


def _literal(text: str) -> str:
    """Shown as written inside a code block: escaped, and unable to close the block."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("```", "'''")


def prompt_blocks(params: PermissionRequestParams) -> list[dict[str, Any]]:
    head = f"*Approve {_literal(params.tool_name)}?*\n{to_slack_mrkdwn(params.description)[:600]}\n"
    tail = f"Press a button, or reply `yes {params.request_id}` / `no {params.request_id}`."
    room = SECTION_LIMIT - len(head) - len(tail) - len("```\n\n```\n")
    text = f"{head}```\n{_literal(params.input_preview)[:room]}\n```\n{tail}"
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {
            "type": "actions",
            "block_id": f"nexo_prompt_{params.request_id}",
            "elements": [
                {
                    "type": "button",
                    "action_id": "nexo_allow",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": params.request_id,
                },
                {
                    "type": "button",
                    "action_id": "nexo_deny",
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Deny"},
                    "value": params.request_id,
                },
            ],
        },
    ]


class Approvals:
    def __init__(self, sender: Sender, channel: Channel, chat_ids: list[str]) -> None:
        self._sender = sender
        self._channel = channel
        self.prompts = ButtonPrompts(
            chat_ids,
            self._post,
            self._update,
            logger=logger,
            unconfigured="set NEXO_SLACK_APPROVAL_CHANNEL_IDS to your DM channel with the app to "
            "approve from Slack",
        )

    async def _post(self, chat_id: str, params: PermissionRequestParams) -> str:
        text = f"Approve {params.tool_name}? Reply yes {params.request_id} / no {params.request_id}"
        posted = await self._sender.call(
            "chat.postMessage", {"channel": chat_id, "text": text, "blocks": prompt_blocks(params)}
        )
        return str(posted["ts"])

    async def _update(self, chat_id: str, ts: str, closed: PromptClosed) -> None:
        outcome = OUTCOMES.get(closed.outcome or "", "closed")
        who = f" by {closed.decided_by}" if closed.decided_by else ""
        text = f"Request `{closed.request_id}`: {to_slack_mrkdwn(outcome + who)}."
        await self._sender.call("chat.update", {"channel": chat_id, "ts": ts, "text": text, "blocks": []})

    async def pressed(self, press: Press) -> None:
        """Store the press as the presser's answer, once."""
        received = await self._channel.press(
            press.request_id,
            press.behavior,
            press.user_id,
            press.chat_id,
            press.dedupe_key,
            sender_name=press.user_name,
        )
        if received.seq == 0:
            logger.info("slack: a press on request %s, which is not open here", press.request_id)
