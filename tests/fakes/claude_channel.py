"""A channel server written only to the Claude Code contract, the way a third party would write it.

It knows nothing of nexo: it declares only ``experimental["claude/channel"]``, pushes each inbound
message as ``notifications/claude/channel`` with ``{content, meta}`` (no ids, no acks, no event log
to pull), and answers through one tool, ``reply(chat_id, text)``. Built on the low-level ``Server``.

Its "platform" is local, so a test can drive it:

- ``CLAUDE_CHANNEL_INBOX``: a Unix socket it listens on. Each line written there is one inbound
  message: a JSON object ``{"content": "...", "meta": {...}}``, or plain text (then the meta is
  ``{"chat_id": "local", "user": "local", "user_id": "local"}``).
- ``CLAUDE_CHANNEL_REPLIES``: a file; each reply is appended as one JSON line ``{"chat_id", "text"}``.

Run it as ``python -m tests.fakes.claude_channel``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, ValidationError

logger = logging.getLogger("claude_channel")

NAME = "claude-fake"
CHANNEL_CAPABILITY = "claude/channel"
MAX_LINE = 64 * 1024
INSTRUCTIONS = (
    'Messages arrive as <channel source="claude-fake" chat_id="...">. Answer with the reply tool, '
    "passing the chat_id from the tag."
)


class ChannelParams(types.NotificationParams):
    content: str
    meta: dict[str, str]  # the contract's own "meta", not the protocol's "_meta"


class ChannelNotification(types.Notification[ChannelParams, Literal["notifications/claude/channel"]]):
    method: Literal["notifications/claude/channel"] = "notifications/claude/channel"


class ReplyArguments(BaseModel):
    chat_id: str
    text: str


REPLY_TOOL = types.Tool(
    name="reply",
    description="Send a message to the chat the user wrote from.",
    input_schema=ReplyArguments.model_json_schema(),
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
)


@dataclass
class State:
    inbox: Path | None
    replies: Path | None
    messages: MemoryObjectSendStream[ChannelParams]
    sessions: list[ServerSession] = field(default_factory=list)
    connected: anyio.Event = field(default_factory=anyio.Event)


def parse_line(line: str) -> ChannelParams:
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if isinstance(data, dict) and "content" in data:
        return ChannelParams.model_validate({"meta": {}, **data})
    return ChannelParams(content=line, meta={"chat_id": "local", "user": "local", "user_id": "local"})


async def _read_lines(state: State, stream: SocketStream) -> None:
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        while True:
            try:
                line = await reader.receive_until(b"\n", MAX_LINE)
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.DelimiterNotFound):
                return
            text = line.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                await state.messages.send(parse_line(text))
            except ValidationError as exc:
                logger.warning("ignoring a malformed inbox line: %s", exc.errors()[0]["msg"])


async def _serve_inbox(
    state: State, inbox: Path, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    await anyio.Path(inbox).unlink(missing_ok=True)
    # anyio's own listener, as a third party would use it (nexo's servers use shared.unix_socket).
    async with await anyio.create_unix_listener(inbox) as listener:  # noqa: TID251
        task_status.started()
        await listener.serve(lambda stream: _read_lines(state, stream))


async def _push(state: State, messages: MemoryObjectReceiveStream[ChannelParams]) -> None:
    # Like a real channel, nothing is stored: a message waits only until a client has connected.
    async for params in messages:
        await state.connected.wait()
        for session in list(state.sessions):
            try:
                await session.send_notification(ChannelNotification(params=params))  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 -- a closed client is dropped
                state.sessions.remove(session)


def build_server(inbox: Path | None, replies: Path | None) -> Server[State]:
    @asynccontextmanager
    async def lifespan(_: Server[State]) -> AsyncIterator[State]:
        send, receive = anyio.create_memory_object_stream[ChannelParams](100)
        state = State(inbox=inbox, replies=replies, messages=send)
        async with send, receive, anyio.create_task_group() as tg:
            tg.start_soon(_push, state, receive)
            if inbox is not None:
                await tg.start(_serve_inbox, state, inbox)
            try:
                yield state
            finally:
                tg.cancel_scope.cancel()

    async def list_tools(
        ctx: ServerRequestContext[State], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[REPLY_TOOL])

    async def call_tool(
        ctx: ServerRequestContext[State], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name != REPLY_TOOL.name:
            return _error(f"unknown tool {params.name!r}; the only tool is 'reply'")
        try:
            arguments = ReplyArguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            return _error(f"reply takes chat_id and text: {exc.errors()[0]['msg']}")
        line = json.dumps(arguments.model_dump(), ensure_ascii=False)
        replies = ctx.lifespan_context.replies
        if replies is None:
            print(line, file=sys.stderr)
        else:
            async with await anyio.open_file(replies, "a", encoding="utf-8") as file:
                await file.write(line + "\n")
        return types.CallToolResult(content=[types.TextContent(type="text", text="sent")])

    async def initialized(ctx: ServerRequestContext[State], params: types.NotificationParams) -> None:
        # The handshake's last step: from now on this client can be pushed to.
        ctx.lifespan_context.sessions.append(ctx.session)
        ctx.lifespan_context.connected.set()

    server = _ChannelServer(
        NAME, instructions=INSTRUCTIONS, lifespan=lifespan, on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    return server


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class _ChannelServer(Server[State]):
    """Declares the channel capability whoever builds the initialization options (stdio or a test)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        experimental = {CHANNEL_CAPABILITY: {}, **(experimental_capabilities or {})}
        return super().create_initialization_options(notification_options, experimental, extensions)


def _path(variable: str) -> Path | None:
    value = os.environ.get(variable)
    return Path(value) if value else None


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = build_server(_path("CLAUDE_CHANNEL_INBOX"), _path("CLAUDE_CHANNEL_REPLIES"))

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
