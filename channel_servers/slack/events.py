"""Slack events as messages for the agent: which ones are answered, where the answer goes, and the
key that stores each once.

The chat is the Slack channel id (a DM's ``D...``, a channel's ``C...``). In a channel the bot answers
mentions, always in the thread: ``thread_id`` is ``<channel>:<thread_ts>`` (the thread's root
``ts``), which is the message's session key, so a thread keeps its session across restarts. A DM
is one session, and a thread inside it another. ``chat_type`` (``im``, ``channel``, ``group``,
``mpim``) tells nexo's pairing whether it is a direct chat or a group.

Messages from bots (any ``bot_id``, the ``bot_message`` subtype, or this bot's own user)
are never answered, so two bots cannot answer each other forever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

Edits = Literal["ignore", "as_message"]
ANSWERED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Message:
    chat_id: str
    """The Slack channel id: where the answer goes, and the group that pairing admits."""
    ts: str
    root: str | None
    """The ``ts`` of the thread the answer goes into; ``None`` for a DM outside a thread."""
    text: str
    meta: dict[str, str]
    dedupe_key: str
    files: tuple[dict[str, Any], ...] = ()


def parse(event: dict[str, Any], *, bot_user_id: str, edits: Edits) -> Message | None:
    """The message to answer in ``event`` (an Events API ``event``), or ``None`` when there is none."""
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    subtype = event.get("subtype")
    edited = False
    if subtype == "message_changed" and edits == "as_message":
        inner = event.get("message")
        if not isinstance(inner, dict) or inner.get("subtype") is not None:
            return None
        event = {**inner, "channel": event.get("channel"), "channel_type": event.get("channel_type")}
        edited = True
    elif subtype not in ANSWERED_SUBTYPES:
        return None  # edits (unless configured), deletions, joins, topic changes, bot messages
    user = event.get("user")
    if event.get("bot_id") or not isinstance(user, str) or user == bot_user_id:
        return None
    channel, ts = event.get("channel"), event.get("ts")
    if not isinstance(channel, str) or not isinstance(ts, str):
        return None
    text = str(event.get("text") or "")
    direct = event.get("channel_type") == "im" or channel.startswith("D")
    mentioned = kind == "app_mention" or f"<@{bot_user_id}>" in text
    if not direct and not mentioned:
        return None
    thread = event.get("thread_ts")
    root = thread if isinstance(thread, str) else (None if direct else ts)
    meta = {
        "chat_id": channel,
        "message_id": ts,
        "user_id": user,
        "chat_type": "im" if direct else str(event.get("channel_type") or _kind_of(channel)),
    }
    if root:
        meta["thread_id"] = f"{channel}:{root}"
    if mentioned and not direct:
        meta["mentioned"] = "true"
    if edited:
        meta["edited"] = "true"
    edit_ts = str((event.get("edited") or {}).get("ts", "")) if edited else ""
    dedupe_key = f"{channel}:{ts}" + (f":edit:{edit_ts}" if edit_ts else "")
    files = tuple(item for item in event.get("files") or () if isinstance(item, dict))
    return Message(channel, ts, root, _without_own_mention(text, bot_user_id), meta, dedupe_key, files)


def _kind_of(channel: str) -> str:
    return "group" if channel.startswith("G") else "channel"


def _without_own_mention(text: str, bot_user_id: str) -> str:
    return _MENTION.sub(lambda match: "" if match.group(1) == bot_user_id else match.group(0), text).strip()


def split_chat_id(chat_id: str) -> tuple[str, str | None]:
    """``C123``, or ``C123:1700000000.000100`` naming a thread, as the channel and the thread."""
    channel, _, thread = chat_id.partition(":")
    if not re.fullmatch(r"[CDG][A-Z0-9]{2,}", channel) or (
        thread and not re.fullmatch(r"[0-9]+\.[0-9]+", thread)
    ):
        raise ValueError(
            f"chat id {chat_id!r} is not a Slack chat: use the chat_id of the message you answer "
            "(a channel id such as C0123ABC, optionally with ':' and the thread's ts)"
        )
    return channel, thread or None
