"""What one Telegram update means to nexo: a message (content, meta, dedupe key), a button press, or
nothing. Pure functions over the Bot API's JSON; no I/O.

Identity is the sender's numeric user id, never a name or phone number. ``chat_id`` is Telegram's
chat id (what pairing keys a group by); in a forum topic ``thread_id`` is ``<chat>:<topic>``, which
makes each topic a session of its own, and an answer quoting the message lands in its topic. The
outbound tool also takes ``<chat>:<topic>`` as a chat id, to write into a topic unprompted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CALLBACK_PREFIX = "nexo"


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A file attached to a message, to fetch with ``getFile``."""

    file_id: str
    kind: str
    """photo, voice, audio, video or document."""
    mime_type: str
    file_name: str
    size: int | None


@dataclass(frozen=True, slots=True)
class Message:
    content: str
    meta: dict[str, str]
    dedupe_key: str
    chat_id: str
    media: list[MediaRef] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Press:
    """A button press (callback query) on a message the bot sent."""

    query_id: str
    user_id: str
    user_name: str
    chat_id: str
    message_id: str
    data: str


def session_chat_id(chat_id: int | str, thread_id: int | str | None) -> str:
    return f"{chat_id}:{thread_id}" if thread_id is not None else str(chat_id)


def split_chat_id(chat_id: str) -> tuple[str, int | None]:
    """``"-100123:45"`` -> (``"-100123"``, 45); a plain chat id has no thread."""
    chat, _, thread = chat_id.partition(":")
    if thread:
        if not thread.isdigit():
            raise ValueError(f"chat_id {chat_id!r}: expected <chat> or <chat>:<topic id>")
        return chat, int(thread)
    return chat, None


def parse(update: dict[str, Any], *, bot_username: str, edits: bool) -> Message | Press | None:
    """The nexo meaning of ``update``; None for kinds nexo does not handle (and edits, unless ``edits``)."""
    if isinstance(update.get("callback_query"), dict):
        return _press(update["callback_query"])
    message = update.get("message")
    edited = False
    if not isinstance(message, dict) and edits:
        message, edited = update.get("edited_message"), True
    if not isinstance(message, dict):
        return None
    return _message(message, bot_username=bot_username, edited=edited)


def _press(query: dict[str, Any]) -> Press | None:
    message = query.get("message") or {}
    sender = (query.get("from") or {}).get("id")
    chat = (message.get("chat") or {}).get("id")
    if sender is None or chat is None or not isinstance(query.get("data"), str):
        return None
    return Press(
        query_id=str(query["id"]),
        user_id=str(sender),
        user_name=_display_name(query["from"]),
        chat_id=str(chat),
        message_id=str(message.get("message_id", "")),
        data=query["data"],
    )


def _message(message: dict[str, Any], *, bot_username: str, edited: bool) -> Message | None:
    chat = message.get("chat") or {}
    sender = message.get("from") or {}
    if "id" not in chat or "id" not in sender or sender.get("is_bot"):
        return None
    thread = message.get("message_thread_id") if message.get("is_topic_message") else None
    chat_id = str(chat["id"])
    text = message.get("text") or message.get("caption") or ""
    media = _media(message)
    if not text and not media:
        return None
    meta: dict[str, str] = {
        "chat_id": chat_id,
        "message_id": str(message["message_id"]),
        "user_id": str(sender["id"]),
        "user": _display_name(sender),
        "chat_type": str(chat.get("type", "private")),
    }
    if thread is not None:
        meta["thread_id"] = session_chat_id(chat["id"], thread)
        meta["topic_id"] = str(thread)
    if isinstance(message.get("reply_to_message"), dict):
        meta["reply_to"] = str(message["reply_to_message"].get("message_id", ""))
    if meta["chat_type"] != "private" and _mentions(message, bot_username):
        meta["mentioned"] = "true"
    payload = start_payload(text)
    if payload is not None:
        meta["start_payload"] = payload
    key = f"msg:{chat['id']}:{message['message_id']}"
    if edited:
        meta["edited"] = "true"
        key = f"edit:{chat['id']}:{message['message_id']}:{message.get('edit_date', 0)}"
    return Message(content=text, meta=meta, dedupe_key=key, chat_id=chat_id, media=media)


def start_payload(text: str) -> str | None:
    """The payload of a ``/start <payload>`` deep link (``t.me/<bot>?start=<payload>``)."""
    command, _, payload = text.strip().partition(" ")
    if command.split("@", 1)[0] != "/start" or not payload.strip():
        return None
    return payload.strip()


def _display_name(user: dict[str, Any]) -> str:
    name = " ".join(str(user[key]) for key in ("first_name", "last_name") if user.get(key))
    return name or str(user.get("username") or user["id"])


def _mentions(message: dict[str, Any], bot_username: str) -> bool:
    """The bot is @mentioned, addressed by a /command@bot, or replied to."""
    reply = message.get("reply_to_message") or {}
    if (reply.get("from") or {}).get("username", "").lower() == bot_username.lower() and bot_username:
        return True
    text = message.get("text") or message.get("caption") or ""
    needle = f"@{bot_username}".lower()
    for entity in message.get("entities") or message.get("caption_entities") or []:
        if entity.get("type") in ("mention", "bot_command"):
            start = _utf16_slice(text, entity.get("offset", 0), entity.get("length", 0))
            if needle in start.lower():
                return True
    return False


def _utf16_slice(text: str, offset: int, length: int) -> str:
    encoded = text.encode("utf-16-le")
    return encoded[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


def _media(message: dict[str, Any]) -> list[MediaRef]:
    found: list[MediaRef] = []
    photos = message.get("photo")
    if isinstance(photos, list) and photos:
        largest = max(photos, key=lambda size: size.get("width", 0) * size.get("height", 0))
        found.append(
            MediaRef(largest["file_id"], "photo", "image/jpeg", "photo.jpg", largest.get("file_size"))
        )
    defaults = {
        "voice": ("audio/ogg", "voice.ogg"),
        "audio": ("audio/mpeg", "audio.mp3"),
        "video": ("video/mp4", "video.mp4"),
        "document": ("application/octet-stream", "document"),
    }
    for kind, (mime, name) in defaults.items():
        item = message.get(kind)
        if isinstance(item, dict) and "file_id" in item:
            found.append(
                MediaRef(
                    item["file_id"],
                    kind,
                    str(item.get("mime_type") or mime),
                    str(item.get("file_name") or name),
                    item.get("file_size"),
                )
            )
    return found


def callback_data(behavior: str, request_id: str) -> str:
    """What an Approve / Deny button carries (at most 64 bytes, as Telegram requires)."""
    return f"{CALLBACK_PREFIX}:{behavior}:{request_id}"


def parse_callback(data: str) -> tuple[Literal["allow", "deny"], str] | None:
    """(``allow`` | ``deny``, request id) from a button of ours; None for anything else."""
    prefix, _, rest = data.partition(":")
    behavior, _, request_id = rest.partition(":")
    if prefix != CALLBACK_PREFIX or not request_id:
        return None
    if behavior == "allow":
        return "allow", request_id
    if behavior == "deny":
        return "deny", request_id
    return None
