"""Outbound delivery: the outbox, one chat at a time and in order, for text and files alike.

Every message for a chat, a reply or a queued one, goes out under that chat's lock and after every
older pending message of the chat, so a reply never overtakes a notice still waiting in the queue.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from shared.channelkit.files import FileRefused, resolve_outbound_file
from shared.channelkit.outbox import Outbox, OutboxEntry, OutboxStatus
from shared.channelkit.typing import Typing
from shared.db import Database

logger = logging.getLogger("nexo.channel")

Send = Callable[[str, str, str | None], Awaitable[str]]
"""(chat_id, text, reply_to) -> the platform's id of the delivered message."""
SendFile = Callable[[str, Path, str | None, str | None, str], Awaitable[str]]
"""(chat_id, path, caption, reply_to, mime) -> the platform's id of the delivered message."""


class Unreachable(Exception):
    """The recipient cannot be reached now (offline, socket closed): the message stays queued."""


class SendFailed(Exception):
    """The platform refused the message for good (unknown chat, too long): it is recorded as failed."""


class SendResult(BaseModel):
    status: Literal["sent", "queued", "duplicate"]
    """sent; queued (the chat is unreachable now and gets it when it comes back); or duplicate
    (this idempotency_key was used before: nothing was sent, ``state`` says how that one went)."""
    message_id: str
    platform_message_id: str | None
    state: OutboxStatus


class ChatLocks:
    """One lock per chat, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, chat_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(chat_id, (anyio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._locks[chat_id]


@dataclass(frozen=True, slots=True)
class Platform:
    """What the channel's author gave the kit for sending."""

    name: str
    send: Send
    send_file: SendFile | None
    workspace: Path
    max_file_bytes: int
    typing: Typing | None


class Delivery:
    def __init__(self, platform: Platform, db: Database, outbox: Outbox, clock: Callable[[], float]) -> None:
        self._platform = platform
        self._db = db
        self._outbox = outbox
        self._clock = clock
        self._locks = ChatLocks()

    async def send(
        self, text: str, chat_id: str, reply_to: str | None, idempotency_key: str | None, notice: bool
    ) -> SendResult:
        """One outbox entry per idempotency key, delivered after the chat's older pending entries."""
        self._stop_typing(chat_id)
        begun = await self._outbox.begin(
            idempotency_key or uuid.uuid4().hex, chat_id, text, reply_to, notice=notice, status="pending"
        )
        if not begun.created:
            return _duplicate(begun.entry)
        return await self._deliver(begun.entry)

    async def send_file(
        self, chat_id: str, path: str, caption: str | None, reply_to: str | None, idempotency_key: str | None
    ) -> SendResult:
        """A workspace file through the same outbox: the path is checked now, the file read when sent."""
        try:
            found = resolve_outbound_file(self._platform.workspace, path, self._platform.max_file_bytes)
        except FileRefused as exc:
            raise ToolError(str(exc)) from None
        self._stop_typing(chat_id)
        begun = await self._outbox.begin(
            idempotency_key or uuid.uuid4().hex,
            chat_id,
            caption or "",
            reply_to,
            status="pending",
            file_path=str(found.path),
            mime=found.mime,
        )
        if not begun.created:
            return _duplicate(begun.entry)
        return await self._deliver(begun.entry)

    async def flush(self, chat_id: str) -> int:
        """Deliver the queued messages of a chat that is reachable again, oldest first; returns how many."""
        async with self._locks.hold(chat_id):
            return await self._flush_held(chat_id)

    def _stop_typing(self, chat_id: str) -> None:
        if self._platform.typing is not None:
            self._platform.typing.stop(chat_id)

    async def _deliver(self, entry: OutboxEntry) -> SendResult:
        async with self._locks.hold(entry.chat_id):
            await self._flush_held(entry.chat_id, caller=entry.id)
        now = await self._outbox.get(entry.id)
        assert now is not None
        if now.status == "sent":
            return SendResult(
                status="sent", message_id=str(now.id), platform_message_id=now.provider_id, state="sent"
            )
        if now.status == "pending":
            return SendResult(
                status="queued", message_id=str(now.id), platform_message_id=None, state="pending"
            )
        what = "file" if now.file_path else "message"
        outcome, hint = (
            ("was refused", f"fix the chat_id or the {'file' if now.file_path else 'text'}")
            if now.status == "failed"
            else ("may or may not have been delivered", "check whether it arrived")
        )
        raise ToolError(
            f"{what} {now.id} to chat {now.chat_id!r} {outcome} ({now.error}); it is recorded as "
            f"{now.status} and is never retried under the same idempotency_key: {hint}, then send "
            "again with a new idempotency_key if it still needs to go out"
        )

    async def _flush_held(self, chat_id: str, caller: int | None = None) -> int:
        delivered = 0
        for entry in await self._outbox.pending(chat_id):
            # Claimed by a conditional update, so two processes sharing the file never deliver twice.
            claimed = await self._db.execute(
                "UPDATE outbox SET status = 'sending', updated_at = ? WHERE id = ? AND status = 'pending'",
                (self._clock(), entry.id),
            )
            if not claimed:
                continue
            state, detail = await self._attempt(entry)
            if state == "pending":
                break
            if state == "sent":
                delivered += 1
            elif entry.id != caller:  # the caller's own outcome is told to the model instead
                logger.warning(
                    "%s: queued message %d to chat %r is %s: %s",
                    self._platform.name,
                    entry.id,
                    chat_id,
                    state,
                    detail,
                )
        return delivered

    async def _attempt(self, entry: OutboxEntry) -> tuple[OutboxStatus, str]:
        """(state, platform id or why not). A cancel leaves it ``sending``: ``recover()`` handles that."""
        try:
            platform_id = await self._hand_over(entry)
        except Unreachable as exc:
            await self._outbox.mark_pending(entry.id)
            return "pending", str(exc)
        except SendFailed as exc:
            await self._outbox.mark_failed(entry.id, str(exc))
            return "failed", str(exc)
        except Exception as exc:  # the platform may have taken it: never resend blindly
            logger.exception("%s: sending message %d failed unexpectedly", self._platform.name, entry.id)
            await self._db.execute(
                "UPDATE outbox SET status = 'uncertain', error = ?, updated_at = ? WHERE id = ?",
                (repr(exc), self._clock(), entry.id),
            )
            return "uncertain", repr(exc)
        await self._outbox.mark_sent(entry.id, platform_id)
        return "sent", platform_id

    async def _hand_over(self, entry: OutboxEntry) -> str:
        if entry.file_path is None:
            return await self._platform.send(entry.chat_id, entry.text, entry.reply_to)
        if self._platform.send_file is None:
            raise SendFailed("this channel no longer sends files")
        path = Path(entry.file_path)
        if not await anyio.Path(path).is_file():
            raise SendFailed(f"the file {entry.file_path} is gone from the workspace")
        mime = entry.mime or "application/octet-stream"
        return await self._platform.send_file(entry.chat_id, path, entry.text or None, entry.reply_to, mime)


def _duplicate(entry: OutboxEntry) -> SendResult:
    return SendResult(
        status="duplicate",
        message_id=str(entry.id),
        platform_message_id=entry.provider_id,
        state=entry.status,
    )
