"""What kind of chat a message came from, from its channel's meta.

A channel that says so (``chat_type`` or ``is_group``) is believed; a nexo channel says so for every
group message. A Claude Code channel plugin says nothing (its meta is ``chat_id``, ``message_id``,
``user``, ``user_id``, ``ts``), so its messages are read by the rule that holds on Telegram: a private
chat's id is the user's own id, so a chat whose id differs from its sender's is a group. Where that
rule does not hold (a Discord DM has a channel id of its own), the mistake is the safe one: the chat
counts as a group, and group members speak as contacts, never as the owner, and never get pairing
codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

GROUP_CHAT_TYPES = frozenset({"group", "supergroup", "channel", "room", "thread", "guild", "mpim"})
DM_CHAT_TYPES = frozenset({"private", "direct", "dm", "im"})
SENDER_KEYS = ("user_id", "sender_id", "from_id")
"""Meta keys that carry a sender's stable platform id, in order. Display names never count."""

ChatScope = Literal["dm", "group"]


def sender_of(meta: Mapping[str, str]) -> str | None:
    for key in SENDER_KEYS:
        value = meta.get(key)
        if value:
            return value
    return None


def scope_of(meta: Mapping[str, str], *, infer: bool = False) -> ChatScope:
    """``group`` when the channel says so, or (with ``infer``, for channels that never say) says
    nothing and the chat is not the sender's own."""
    chat_type = meta.get("chat_type", "").lower()
    if chat_type in GROUP_CHAT_TYPES or meta.get("is_group") == "true":
        return "group"
    if not infer or chat_type in DM_CHAT_TYPES or meta.get("is_group") == "false" or chat_type:
        return "dm"
    chat, sender = meta.get("chat_id"), sender_of(meta)
    return "group" if chat and sender and chat != sender else "dm"
