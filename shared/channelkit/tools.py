"""The tools every kit-built channel offers: the outbound message tool and, optionally, ``send_file``."""

from __future__ import annotations

from typing import Annotated, Any, Final, Protocol

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from shared.channelkit.delivery import SendResult
from shared.protocol.outbound import ChatIdArg, IdempotencyKeyArg, NoticeArg, ReplyToArg, TextArg
from shared.protocol.policy import tool_hints

# Only a call with an idempotency_key is safe to repeat, so the tool as a whole is not idempotent.
OUTBOUND = tool_hints(open_world=True)
FILE_TOOL: Final = "send_file"
PathArg = Annotated[
    str,
    Field(description="The file to send: a path in the agent's workspace, relative to its root."),
]
CaptionArg = Annotated[str | None, Field(description="Text shown with the file; omit for none.")]


class Sender(Protocol):
    """What the tools need of the running channel (the server's lifespan state)."""

    async def send(
        self, text: str, chat_id: str, reply_to: str | None, idempotency_key: str | None, notice: bool
    ) -> SendResult: ...

    async def send_file(
        self, chat_id: str, path: str, caption: str | None, reply_to: str | None, idempotency_key: str | None
    ) -> SendResult: ...


def _required(argument: str, value: str, fix: str) -> None:
    if not value.strip():
        raise ToolError(f"{argument} {value!r} is empty; {fix}")


def _chat_required(chat_id: str) -> None:
    _required("chat_id", chat_id, "pass the chat_id from the <channel ...> tag")


def add_outbound_tools(server: MCPServer[Any], name: str, outbound_tool: str, *, files: bool) -> None:
    """Add the message tool named ``outbound_tool`` and, with ``files``, the ``send_file`` tool."""

    async def outbound(
        text: TextArg,
        chat_id: ChatIdArg,
        reply_to: ReplyToArg = None,
        idempotency_key: IdempotencyKeyArg = None,
        notice: NoticeArg = False,
        *,
        ctx: Context[Sender],
    ) -> SendResult:
        _chat_required(chat_id)
        _required("text", text, "write the message to send")
        channel = ctx.request_context.lifespan_context
        return await channel.send(text, chat_id, reply_to, idempotency_key, notice)

    server.add_tool(
        outbound,
        name=outbound_tool,
        title=f"Send a message to a {name} chat",
        description=(
            f"Send a message to a {name} chat (chat_id from the <channel ...> tag). Retrying with the "
            "same idempotency_key never sends twice; queued means it goes out when the chat is back."
        ),
        annotations=OUTBOUND,
    )
    if files:
        _add_file_tool(server, name)


def _add_file_tool(server: MCPServer[Any], name: str) -> None:
    async def send_file_tool(
        chat_id: ChatIdArg,
        path: PathArg,
        caption: CaptionArg = None,
        reply_to: ReplyToArg = None,
        idempotency_key: IdempotencyKeyArg = None,
        *,
        ctx: Context[Sender],
    ) -> SendResult:
        _chat_required(chat_id)
        channel = ctx.request_context.lifespan_context
        return await channel.send_file(chat_id, path, caption, reply_to, idempotency_key)

    server.add_tool(
        send_file_tool,
        name=FILE_TOOL,
        title=f"Send a file to a {name} chat",
        description=(
            f"Send a file from the workspace to a {name} chat (chat_id from the <channel ...> tag), "
            "with an optional caption. Retrying with the same idempotency_key never sends twice; "
            "queued means it goes out when the chat is back."
        ),
        annotations=OUTBOUND,
    )
