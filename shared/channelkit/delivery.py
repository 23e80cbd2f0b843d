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
from shared.channelkit.inflight import InFlight
from shared.channelkit.outbox import Outbox, OutboxEntry, OutboxStatus
from shared.channelkit.typing import Typing
from shared.db import Database

logger = logging.getLogger("nexo.channel")

Send = Callable[[str, str, str | None], Awaitable[str]]
"""(chat_id, text, reply_to) -> the platform's id of the delivered message."""
KeyedSend = Callable[[str, str, str | None, str], Awaitable[str]]
"""(chat_id, text, reply_to, idempotency_key) -> the platform's id: for a platform that can stamp the
key on the message itself (email derives the Message-ID from it), so that ``WasDelivered`` can look."""
WasDelivered = Callable[[OutboxEntry], Awaitable[str | None]]
"""For an entry whose send was interrupted: the platform's id when it arrived, None when it certainly
did not; raise :class:`Unreachable` when the platform cannot say now."""
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
    send: KeyedSend
    send_file: SendFile | None
    workspace: Path
    max_file_bytes: int
    typing: Typing | None
    was_delivered: WasDelivered | None = None


def keyed(send: Send) -> KeyedSend:
    """A ``send`` that has no use for the idempotency key."""

    async def send_keyed(chat_id: str, text: str, reply_to: str | None, _key: str) -> str:
        return await send(chat_id, text, reply_to)

    return send_keyed


class Delivery:
    def __init__(
        self,
        platform: Platform,
        db: Database,
        outbox: Outbox,
        clock: Callable[[], float],
        inflight: InFlight,
    ) -> None:
        self._platform = platform
        self._inflight = inflight
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

    async def settle_uncertain(self) -> int:
        """Ask the platform about every ``uncertain`` entry (with ``was_delivered``): one that arrived
        is ``sent``, one that certainly did not is queued again and delivered in its place in the
        chat; one the platform cannot tell about now stays ``uncertain`` until the next start.
        Returns how many were queued again."""
        check = self._platform.was_delivered
        if check is None:
            return 0
        requeued: list[str] = []
        for entry in await self._outbox.uncertain():
            try:
                platform_id = await check(entry)
            except Unreachable as exc:
                logger.warning(
                    "%s: cannot tell whether message %d arrived (%s); it stays uncertain",
                    self._platform.name,
                    entry.id,
                    exc,
                )
                continue
            if platform_id is not None:
                await self._outbox.mark_sent(entry.id, platform_id)
                logger.info("%s: message %d had arrived before the restart", self._platform.name, entry.id)
            else:
                await self._outbox.mark_pending(entry.id)
                requeued.append(entry.chat_id)
                logger.info("%s: message %d never arrived; sending it again", self._platform.name, entry.id)
        for chat_id in dict.fromkeys(requeued):
            await self.flush(chat_id)
        return len(requeued)

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
            # Shielded: a server told to stop (its host went away) first finishes the hand-over it
            # began (bounded by the platform client's own timeouts) and records how it went, so
            # only a killed process leaves an entry ``sending``, which ``recover()`` makes
            # ``uncertain`` at the next start.
            with anyio.CancelScope(shield=True):
                outcome = await self._claim_and_attempt(entry)
            if outcome is None:
                continue
            state, detail = outcome
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

    async def _claim_and_attempt(self, entry: OutboxEntry) -> tuple[OutboxStatus, str] | None:
        """(state, platform id or why not), recorded before it returns; None when another flush
        claimed the entry first (a conditional update, so two processes never deliver it twice)."""
        async with self._inflight.sending():
            claimed = await self._db.execute(
                "UPDATE outbox SET status = 'sending', updated_at = ? WHERE id = ? AND status = 'pending'",
                (self._clock(), entry.id),
            )
            return await self._attempt(entry) if claimed else None

    async def _attempt(self, entry: OutboxEntry) -> tuple[OutboxStatus, str]:
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
            return await self._platform.send(entry.chat_id, entry.text, entry.reply_to, entry.idempotency_key)
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
