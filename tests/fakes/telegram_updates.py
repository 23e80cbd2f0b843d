"""Updates as Telegram sends them, for tests to inject: messages in private chats, groups and forum
topics, edited messages, photos, voice notes, documents and button presses."""

from __future__ import annotations

import itertools
from typing import Any

from tests.fakes.telegram_wire import Sent, caption_field


class UpdateBuilder:
    """The chats, files and message ids the stand-in knows, and the updates built from them."""

    def __init__(self) -> None:
        self.chats: dict[int, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self._update_ids = itertools.count(1000)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._topics: dict[tuple[int, int], int] = {}
        """(chat, message id) -> forum topic, so a reply lands in the topic of what it replies to."""

    def chat(self, chat_id: int, kind: str = "private", **extra: Any) -> dict[str, Any]:
        """Make a chat known (the bot can write to it); private chats have the user's id."""
        chat = {"id": chat_id, "type": kind, **extra}
        self.chats[chat_id] = chat
        return chat

    def message(
        self,
        user_id: int,
        text: str | None = None,
        *,
        chat_id: int | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: int | None = None,
        first_name: str = "Ana",
        extra: dict[str, Any] | None = None,
        edited: bool = False,
    ) -> dict[str, Any]:
        """An update carrying a message from ``user_id`` (in their private chat unless ``chat_id``)."""
        where = chat_id if chat_id is not None else user_id
        chat = self.chats.get(where) or self.chat(
            where, chat_type, **({"is_forum": True} if thread_id else {})
        )
        message: dict[str, Any] = {
            "message_id": next(self._ids(where)),
            "date": 1_700_000_000,
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
        }
        if text is not None:
            message["text"] = text
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            self._topics[(where, message["message_id"])] = thread_id
        if reply_to is not None:
            message["reply_to_message"] = {"message_id": reply_to, "chat": chat, "date": 1_700_000_000}
        message.update(extra or {})
        return {"edited_message" if edited else "message": message}

    def photo(self, user_id: int, content: bytes, caption: str | None = None) -> dict[str, Any]:
        small, large = self.add_file(content[: len(content) // 4 or 1]), self.add_file(content)
        sizes = [
            {"file_id": small, "file_unique_id": f"u{small}", "width": 90, "height": 90},
            {"file_id": large, "file_unique_id": f"u{large}", "width": 1280, "height": 960},
        ]
        return self.message(user_id, None, extra={"photo": sizes, **caption_field(caption)})

    def voice(self, user_id: int, content: bytes, duration: int = 3) -> dict[str, Any]:
        file_id = self.add_file(content)
        voice = {"file_id": file_id, "file_unique_id": f"u{file_id}", "duration": duration}
        return self.message(user_id, None, extra={"voice": voice | {"mime_type": "audio/ogg"}})

    def document(
        self, user_id: int, content: bytes, name: str, mime: str, caption: str | None = None
    ) -> dict[str, Any]:
        file_id = self.add_file(content)
        document: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
        document |= {"file_name": name, "mime_type": mime, "file_size": len(content)}
        return self.message(user_id, None, extra={"document": document, **caption_field(caption)})

    def press(self, user_id: int, sent: Sent, data: str) -> dict[str, Any]:
        """An update for ``user_id`` pressing a button of a message the bot sent."""
        message = {
            "message_id": sent.message_id,
            "date": 1_700_000_000,
            "chat": self.chats[sent.chat_id],
            "text": sent.text,
        }
        query = {
            "id": f"cb{next(self._update_ids)}",
            "from": {"id": user_id, "is_bot": False, "first_name": "Presser"},
            "message": message,
            "chat_instance": str(sent.chat_id),
            "data": data,
        }
        return {"callback_query": query}

    def add_file(self, content: bytes) -> str:
        file_id = f"F{len(self.files) + 1:04d}"
        self.files[file_id] = content
        return file_id

    def _ids(self, chat_id: int) -> itertools.count[int]:
        return self._message_ids.setdefault(chat_id, itertools.count(1))
