"""The channel kit: a new channel server is only "how to receive" and "how to send".

``define_channel`` builds the whole MCP server around two callables the author writes:

- ``receive(channel)`` runs for the server's lifetime and hands each platform message to
  ``await channel.inbound(content, meta, dedupe_key)``, which stores it durably (deduped), pushes it
  to live MCP sessions and says whether it was new;
- ``send(chat_id, text, reply_to)`` delivers one message and returns the platform's message id, or
  raises :class:`Unreachable` (keep it queued; ``channel.flush(chat_id)`` retries) or
  :class:`SendFailed` (the platform refused it for good).

The kit owns the SQLite file (event log and outbox), the outbound tool with its outbox state machine
(pending -> sending -> sent | uncertain | failed, in order per chat), ``recover()`` at start, the
permission relay when the author passes ``prompt`` (with ``closed`` and ``Channel.press`` for
platforms with buttons), and, optionally, the ``send_file`` tool, received files saved into the
workspace and the typing indicator.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import anyio
from anyio.abc import TaskStatus
from mcp.server import MCPServer

from shared.channelkit.delivery import (
    Delivery,
    KeyedSend,
    Platform,
    Send,
    SendFile,
    SendResult,
    WasDelivered,
    keyed,
)
from shared.channelkit.inflight import InFlight
from shared.channelkit.media import Attachment, save_inbound_file
from shared.channelkit.outbox import OUTBOX_MIGRATIONS, Outbox, OutboxEntry
from shared.channelkit.prompts import Closed, OpenPrompts, PromptClosed
from shared.channelkit.server import LiveSessions, make_channel_server
from shared.channelkit.settings import ChannelSettings
from shared.channelkit.tools import add_outbound_tools
from shared.channelkit.typing import Show, Typing
from shared.db import Database
from shared.events import EVENTS_MIGRATIONS, EventLog
from shared.protocol.channel import (
    PermissionRequestParams,
    PermissionVerdictParams,
    normalize_inbound,
    parse_permission_reply,
    verdict_event,
)
from shared.protocol.permission_prompts import PermissionClosedParams, PromptOutcome

logger = logging.getLogger("nexo.channel")

MESSAGE_KIND: Final = "message"
VERDICT_KIND: Final = "permission_verdict"

Receive = Callable[["Channel"], Coroutine[Any, Any, None]]
"""Runs for the server's lifetime (it may also return early); a crash stops the server."""
Prompt = Callable[[PermissionRequestParams], Awaitable[int]]
"""Show a permission prompt to the operator; returns how many places showed it (0: nobody saw it)."""


@dataclass(frozen=True, slots=True)
class Received:
    kind: Literal["message", "permission_verdict"]
    seq: int
    new: bool
    """False when the dedupe key (or the answered prompt) was seen before: nothing was stored."""


@dataclass(frozen=True, slots=True)
class _Definition:
    name: str
    settings: ChannelSettings
    receive: Receive
    platform: Platform
    prompt: Prompt | None
    closed: Closed | None
    wait_until_ready: bool
    clock: Callable[[], float]
    monotonic: Callable[[], float]


class Channel:
    """The running channel: the lifespan state of its server and what ``receive`` talks to."""

    def __init__(self, definition: _Definition, db: Database, sessions: LiveSessions) -> None:
        self.name = definition.name
        self.settings = definition.settings
        self.db = db
        # Chat messages are deduped by their reply's outbox key, never by their delivery count.
        self.events = EventLog(
            db,
            max_pending=definition.settings.max_pending,
            clock=definition.clock,
            durable_delivery_count=False,
        )
        self.outbox = Outbox(db, clock=definition.clock)
        self.inflight = InFlight(Path(f"{definition.settings.database(definition.name)}.sending"))
        self.delivery = Delivery(definition.platform, db, self.outbox, definition.clock, self.inflight)
        self._definition = definition
        self._sessions = sessions
        self._prompts = OpenPrompts(definition.settings.approval_ttl_s, definition.monotonic)
        self._starting: TaskStatus[None] | None = None

    def ready(self) -> None:
        """The receive side listens: with ``wait_until_ready=True`` the server starts serving only now."""
        if self._starting is not None:
            self._starting.started()
            self._starting = None

    async def _receive(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._starting = task_status
        if not self._definition.wait_until_ready:
            self.ready()
        await self._definition.receive(self)

    async def inbound(self, content: str, meta: Mapping[str, object], dedupe_key: str) -> Received:
        """Store a platform message before the platform is acknowledged; raises EventLogFull when full.

        With permission relay on, ``yes abcde`` / ``no abcde`` answering an open prompt is stored as
        a verdict instead, once per sender (the host decides whose answer counts). Meta keys outside
        ``[A-Za-z_][A-Za-z0-9_]*`` are dropped.
        """
        if not dedupe_key:
            raise ValueError("inbound() needs the platform's dedupe key (e.g. chat id + message id)")
        reply = parse_permission_reply(content) if self._definition.prompt is not None else None
        if reply is not None and self._prompts.is_open(reply.request_id):
            raw_sender = meta.get("user_id") or meta.get("sender")
            chat_id = meta.get("chat_id")
            name = meta.get("user") or meta.get("sender_name")
            return await self._verdict(
                reply.request_id,
                reply.behavior,
                None if raw_sender is None else str(raw_sender),
                str(chat_id) if chat_id else None,
                str(name) if name else None,
            )
        params = normalize_inbound(content, meta)
        appended = await self.events.append(MESSAGE_KIND, dedupe_key, params.model_dump(mode="json"))
        if appended.created:
            await self._sessions.push_message(params)
        return Received(MESSAGE_KIND, appended.seq, appended.created)

    async def press(
        self,
        request_id: str,
        behavior: Literal["allow", "deny"],
        sender: str,
        chat_id: str,
        dedupe_key: str,
        *,
        sender_name: str | None = None,
    ) -> Received:
        """A button press on a prompt: counts exactly like ``yes <id>`` / ``no <id>`` typed by ``sender``.

        The host still decides whether the sender may approve. A press on a prompt that is not open
        here (never asked, or expired) is dropped: ``Received(new=False)``, nothing stored.
        """
        if not dedupe_key:
            raise ValueError("press() needs the platform's dedupe key (e.g. the callback query id)")
        if not sender:
            raise ValueError("press() needs the sender's platform id: the host decides whose answer counts")
        if self._definition.prompt is None or not self._prompts.is_open(request_id):
            return Received(VERDICT_KIND, 0, False)
        return await self._verdict(request_id, behavior, sender, chat_id or None, sender_name)

    async def _verdict(
        self,
        request_id: str,
        behavior: Literal["allow", "deny"],
        sender: str | None,
        chat_id: str | None,
        sender_name: str | None,
    ) -> Received:
        verdict = PermissionVerdictParams(request_id=request_id, behavior=behavior)
        # One answer per sender: a refused sender's answer never stands in for an approver's.
        payload = verdict_event(verdict, sender)
        if chat_id:
            payload["chat_id"] = chat_id  # where to say so when the answer does not count
        if sender_name:
            payload["sender_name"] = sender_name  # shown as who decided, never trusted
        appended = await self.events.append(
            VERDICT_KIND, f"{VERDICT_KIND}:{request_id}:{sender or '-'}", payload
        )
        if appended.created:
            await self._sessions.push_verdict(verdict)
        return Received(VERDICT_KIND, appended.seq, appended.created)

    def open_prompts(self) -> list[PermissionRequestParams]:
        """Prompts still waiting for an answer, e.g. to show a chat that connects after they were sent."""
        return self._prompts.open()

    async def close_prompt(
        self, request_id: str, outcome: PromptOutcome | None = None, decided_by: str | None = None
    ) -> bool:
        """The host settled the prompt: it is shown no more (a late answer still reaches the host,
        which tells its sender it came too late), then the platform's ``closed`` hears how it ended."""
        params = self._prompts.get(request_id)
        shown = self._prompts.close(request_id)
        if self._definition.closed is not None:
            await self._definition.closed(PromptClosed(request_id, outcome, decided_by, params))
        return shown

    async def _on_closed(self, params: PermissionClosedParams) -> bool:
        return await self.close_prompt(params.request_id, params.outcome, params.decided_by)

    async def prompt(self, params: PermissionRequestParams) -> int:
        assert self._definition.prompt is not None
        self._prompts.add(params)
        return await self._definition.prompt(params)

    async def recover(self) -> list[OutboxEntry]:
        """Sends in flight when the process died become ``uncertain``: reported, never resent blindly
        (with ``was_delivered`` the platform is asked once the receive side is up)."""
        async with self.inflight.recovering(self.name):
            interrupted = await self.outbox.recover()
        for entry in interrupted:
            logger.warning(
                "%s: message %d to chat %r may not have been delivered", self.name, entry.id, entry.chat_id
            )
        return interrupted

    async def send(
        self, text: str, chat_id: str, reply_to: str | None, idempotency_key: str | None, notice: bool
    ) -> SendResult:
        """The outbound tool: one outbox entry per idempotency key, delivered after the chat's older
        pending messages (the typing indicator of the chat stops)."""
        return await self.delivery.send(text, chat_id, reply_to, idempotency_key, notice)

    async def send_file(
        self, chat_id: str, path: str, caption: str | None, reply_to: str | None, idempotency_key: str | None
    ) -> SendResult:
        """The ``send_file`` tool: a workspace file through the same outbox as text."""
        return await self.delivery.send_file(chat_id, path, caption, reply_to, idempotency_key)

    async def flush(self, chat_id: str) -> int:
        """Deliver the queued messages of a chat that is reachable again, oldest first; returns how many."""
        return await self.delivery.flush(chat_id)

    async def flush_all(self) -> int:
        """Deliver what waits for every chat, for platforms with no per-chat sign of life (email, where
        the mail server, not a chat, was down, and a queued reply's thread may never write again)."""
        sent = 0
        for chat_id in await self.outbox.chats_waiting():
            sent += await self.flush(chat_id)
        return sent

    async def save_inbound_file(
        self,
        chat_id: str,
        file_name: str | None,
        chunks: AsyncIterator[bytes],
        *,
        max_bytes: int | None = None,
        mime: str | None = None,
    ) -> Attachment:
        """Save a file that came with a message into ``<workspace>/inbox/<name>/<date>/``.

        Raises :class:`TooLarge` past ``max_bytes`` (default and ceiling: the channel's file cap);
        put its ``note()`` in the message instead. See :mod:`shared.channelkit.media`.
        """
        cap = self._definition.platform.max_file_bytes
        limit = min(max_bytes or cap, cap)
        day = datetime.fromtimestamp(self._definition.clock(), UTC).date()
        return await save_inbound_file(
            self.settings.workspace(),
            self.name,
            chat_id,
            file_name,
            chunks,
            max_bytes=limit,
            mime=mime,
            day=day,
        )

    async def stored(self, dedupe_key: str) -> bool:
        """Whether a message with this dedupe key is stored already (a redelivery): download its
        files only the first time."""
        row = await self.db.fetchone("SELECT 1 FROM events WHERE dedupe_key = ?", (dedupe_key,))
        return row is not None

    def typing_started(self, chat_id: str) -> None:
        """A message arrived in ``chat_id``: show typing there until the reply goes out (with ``typing=``)."""
        if self.typing is not None:
            self.typing.start(chat_id)

    @property
    def typing(self) -> Typing | None:
        """The typing indicators (None without ``typing=``)."""
        return self._definition.platform.typing


def define_channel(
    name: str,
    *,
    settings: ChannelSettings,
    receive: Receive,
    send: Send | None = None,
    instructions: str,
    send_keyed: KeyedSend | None = None,
    was_delivered: WasDelivered | None = None,
    outbound_tool: str = "send_message",
    prompt: Prompt | None = None,
    closed: Closed | None = None,
    send_file: SendFile | None = None,
    max_file_bytes: int | None = None,
    typing: Show | None = None,
    typing_interval_s: float = 4.0,
    typing_max_s: float = 120.0,
    wait_until_ready: bool = False,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> MCPServer[Any]:
    """A complete channel server. Pass ``prompt`` only if the platform authenticates who replies.

    With ``wait_until_ready`` the server answers nobody until ``receive`` calls ``channel.ready()``
    (say, once its port is bound), so a receive side that cannot start fails the server's start.
    With ``send_file`` the server also offers the ``send_file`` tool, for workspace files of at most
    ``max_file_bytes`` (the lower of it and the ``max_file_bytes`` setting). With ``typing``,
    ``channel.typing_started(chat_id)`` shows typing until the chat's next message goes out.
    Give ``send_keyed`` instead of ``send`` when the platform can carry the outbox entry's idempotency
    key on the message, and ``was_delivered`` when it can then tell whether an interrupted send
    arrived: ``uncertain`` entries are checked at each start, once ``receive`` is ready.
    """
    if send_keyed is None:
        if send is None:
            raise ValueError(f"channel {name!r}: give send= (or send_keyed=)")
        send_keyed = keyed(send)
    elif send is not None:
        raise ValueError(f"channel {name!r}: give send= or send_keyed=, not both")
    if closed is not None and prompt is None:
        raise ValueError(f"channel {name!r}: closed= needs prompt= (only relayed prompts are closed)")
    if max_file_bytes is not None and max_file_bytes < 1:
        raise ValueError(f"channel {name!r}: max_file_bytes {max_file_bytes!r} must be at least 1")
    platform = Platform(
        name,
        send_keyed,
        send_file,
        settings.workspace(),
        min(settings.max_file_bytes, max_file_bytes or settings.max_file_bytes),
        None if typing is None else Typing(typing, interval_s=typing_interval_s, max_s=typing_max_s),
        was_delivered,
    )
    definition = _Definition(
        name, settings, receive, platform, prompt, closed, wait_until_ready, clock, monotonic
    )
    sessions: LiveSessions | None = None

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[Channel]:
        async with Database.open(
            settings.database(name), (*EVENTS_MIGRATIONS, *OUTBOX_MIGRATIONS), inline=True
        ) as db:
            assert sessions is not None
            channel = Channel(definition, db, sessions)
            await channel.recover()
            async with anyio.create_task_group() as tg:
                if platform.typing is not None:
                    platform.typing.bind(tg)
                await tg.start(channel._receive)
                await channel.delivery.settle_uncertain()
                try:
                    yield channel
                finally:
                    tg.cancel_scope.cancel()
            channel.inflight.close()

    server, sessions = make_channel_server(
        name,
        instructions=instructions,
        lifespan=lifespan,
        get_log=lambda channel: channel.events,
        event_kinds=(MESSAGE_KIND, VERDICT_KIND) if prompt is not None else (MESSAGE_KIND,),
        outbound_tool=outbound_tool,
        permission=Channel.prompt if prompt is not None else None,
        closed=Channel._on_closed if prompt is not None else None,
    )

    add_outbound_tools(server, name, outbound_tool, files=send_file is not None)
    return server
