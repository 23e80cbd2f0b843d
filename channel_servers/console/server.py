"""The console channel server: inbound from ``nexo chat`` into a durable log, replies via ``send_message``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from channel_servers.console.hub import ChatClient, Hub, PendingApprovals
from channel_servers.console.settings import ConsoleSettings
from channel_servers.console.store import ConsoleStore, open_store
from shared.channelkit.server import LiveSessions, make_channel_server
from shared.events import EventLog, EventLogFull
from shared.hosting.main import server_main
from shared.protocol.channel import (
    PermissionRequestParams,
    PermissionVerdictParams,
    normalize_inbound,
    parse_permission_reply,
    verdict_event,
)
from shared.protocol.console_wire import Approval, Error, Queued, Reply, Say, Verdict, Welcome
from shared.protocol.outbound import IdempotencyKeyArg, NoticeArg, ReplyToArg, TextArg
from shared.protocol.policy import tool_hints

SERVER_NAME = "console"
MESSAGE_KIND = "message"
VERDICT_KIND = "permission_verdict"
# Only a call with an idempotency_key is safe to repeat, so the tool as a whole is not idempotent.
OUTBOUND = tool_hints()


@dataclass
class ConsoleState:
    store: ConsoleStore
    hub: Hub
    approvals: PendingApprovals


class SendResult(BaseModel):
    status: str
    """sent (a chat showed it), queued (no chat connected; shown on next connect) or duplicate."""
    message_id: str


class Console:
    """Glue between the socket hub, the store and the MCP sessions."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.sessions: LiveSessions | None = None

    @asynccontextmanager
    async def lifespan(self, _: MCPServer[Any]) -> AsyncIterator[ConsoleState]:
        approvals = PendingApprovals(self.settings.approval_ttl_s)
        async with open_store(self.settings.database, max_pending=self.settings.max_pending) as store:
            await store.outbox.recover()
            state: ConsoleState | None = None

            async def on_hello(client: ChatClient) -> None:
                assert state is not None
                await client.send(Welcome(server=SERVER_NAME, chat_id=client.chat_id))
                for entry in await store.outbox.pending(client.chat_id):
                    frame = Reply(
                        message_id=str(entry.id),
                        text=entry.text,
                        reply_to=entry.reply_to,
                        notice=entry.notice,
                    )
                    # sending first: dying between the write and the mark must not show it twice.
                    await store.outbox.mark_sending(entry.id)
                    if await client.send(frame):
                        await store.outbox.mark_sent(entry.id, f"console-{entry.id}")
                    else:
                        await store.outbox.mark_pending(entry.id)
                for prompt in approvals.open():
                    await client.send(prompt)

            async def on_say(client: ChatClient, say: Say) -> None:
                await self._inbound(store, approvals, client, say)

            hub = Hub(self.settings.socket, on_hello=on_hello, on_say=on_say)
            state = ConsoleState(store=store, hub=hub, approvals=approvals)
            async with anyio.create_task_group() as tg:
                await tg.start(hub.serve)
                try:
                    yield state
                finally:
                    tg.cancel_scope.cancel()

    async def _inbound(
        self, store: ConsoleStore, approvals: PendingApprovals, client: ChatClient, say: Say
    ) -> None:
        reply = parse_permission_reply(say.text)
        if reply is not None:
            if not approvals.take(reply.request_id):
                await client.send(
                    Error(message=f"no pending approval {reply.request_id!r} (answered or expired)")
                )
                return
            verdict = PermissionVerdictParams(request_id=reply.request_id, behavior=reply.behavior)
            # The console's socket is the operator's own (mode 0600): whoever answers is the operator.
            await store.events.append(
                VERDICT_KIND, f"verdict:{reply.request_id}", verdict_event(verdict, "operator")
            )
            await client.send(Verdict(request_id=reply.request_id, behavior=reply.behavior))
            if self.sessions is not None:
                await self.sessions.push_verdict(verdict)
            return
        params = normalize_inbound(
            say.text,
            {"chat_id": client.chat_id, "message_id": say.id, "user_id": "operator", "sender": "operator"},
        )
        try:
            appended = await store.events.append(
                MESSAGE_KIND, f"console:{client.chat_id}:{say.id}", params.model_dump(mode="json")
            )
        except EventLogFull as exc:
            await client.send(Error(message=str(exc)))
            return
        await client.send(Queued(id=say.id, seq=appended.seq, duplicate=not appended.created))
        if appended.created and self.sessions is not None:
            await self.sessions.push_message(params)

    async def on_permission(self, state: ConsoleState, params: PermissionRequestParams) -> int:
        prompt = Approval(
            request_id=params.request_id,
            tool_name=params.tool_name,
            description=params.description,
            input_preview=params.input_preview,
        )
        state.approvals.add(params.request_id, prompt)
        return await state.hub.broadcast(prompt)


def _log(state: ConsoleState) -> EventLog:
    return state.store.events


def build_server(settings: ConsoleSettings) -> MCPServer[Any]:
    console = Console(settings)
    server, sessions = make_channel_server(
        SERVER_NAME,
        instructions=(
            'Messages from the operator\'s terminal arrive as <channel source="console" ...>. '
            "Reply with the send_message tool, passing the chat_id from the tag."
        ),
        lifespan=console.lifespan,
        get_log=_log,
        event_kinds=(MESSAGE_KIND, VERDICT_KIND),
        permission=console.on_permission,
    )
    console.sessions = sessions

    @server.tool(title="Message the operator's terminal", annotations=OUTBOUND)
    async def send_message(
        text: TextArg,
        chat_id: Annotated[
            str,
            Field(description="The terminal chat: the chat_id of the <channel ...> tag, usually 'operator'."),
        ] = "operator",
        reply_to: ReplyToArg = None,
        idempotency_key: IdempotencyKeyArg = None,
        notice: NoticeArg = False,
        *,
        ctx: Context[ConsoleState],
    ) -> SendResult:
        """Show a message in the operator's terminal chat.

        Retrying with the same idempotency_key never shows it twice.
        """
        state = ctx.request_context.lifespan_context
        key = idempotency_key or uuid.uuid4().hex
        # A chat connecting now gets its queued replies first (under the same lock), then this one.
        async with state.hub.chat_lock(chat_id):
            begun = await state.store.outbox.begin(key, chat_id, text, reply_to, notice=notice)
            entry = begun.entry
            if not begun.created:
                return SendResult(status="duplicate", message_id=str(entry.id))
            frame = Reply(message_id=str(entry.id), text=text, reply_to=reply_to, notice=notice)
            if await state.hub.deliver(chat_id, frame):
                await state.store.outbox.mark_sent(entry.id, f"console-{entry.id}")
                return SendResult(status="sent", message_id=str(entry.id))
            await state.store.outbox.mark_pending(entry.id)
            return SendResult(status="queued", message_id=str(entry.id))

    return server


def main() -> int:
    return server_main("channel_servers.console", lambda: build_server(ConsoleSettings()))
