"""A nexo channel whose "platform" is a Unix socket, so a test can play any sender.

Written with the channel kit like a real channel: every inbound message goes to the durable event
log before the platform is acknowledged, and replies go through ``send_message``.

- ``NEXO_INBOX_SOCKET``: each line written there is one message ``{"content", "meta", "id"}``
  (``id`` is the platform's dedupe key). The kit answers nothing back on the socket.
- ``NEXO_INBOX_REPLIES``: a file; each reply is appended as ``{"chat_id", "text"}`` and each relayed
  permission prompt as ``{"prompt": {...}}`` (the platform authenticates senders by ``user_id``).

Run it as ``python -m tests.fakes.inbox_channel``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server import MCPServer
from pydantic_settings import SettingsConfigDict

from shared import unix_socket
from shared.channelkit import Channel, ChannelSettings, channel_main, define_channel
from shared.protocol.channel import PermissionRequestParams
from shared.unix_socket import UnixStream

MAX_LINE = 1 << 20


class InboxSettings(ChannelSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_INBOX_", extra="forbid")

    socket: Path
    replies: Path


class Inbox:
    def __init__(self, settings: InboxSettings) -> None:
        self.settings = settings

    def _append(self, record: dict[str, Any]) -> None:
        with self.settings.replies.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

    async def receive(self, channel: Channel) -> None:
        async def serve(client: UnixStream) -> None:
            async with client:
                lines = BufferedByteReceiveStream(client)
                while True:
                    try:
                        line = await lines.receive_until(b"\n", MAX_LINE)
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        return
                    message = json.loads(line)
                    await channel.inbound(message["content"], message["meta"], message["id"])

        self.settings.socket.unlink(missing_ok=True)
        listener = await unix_socket.listen(self.settings.socket)
        channel.ready()
        await listener.serve(serve)

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        self._append({"chat_id": chat_id, "text": text})
        return f"r-{chat_id}-{len(text)}"

    async def prompt(self, params: PermissionRequestParams) -> int:
        self._append({"prompt": params.model_dump(mode="json")})
        return 1


def build_server(settings: InboxSettings) -> MCPServer[Any]:
    inbox = Inbox(settings)
    return define_channel(
        "inbox",
        settings=settings,
        receive=inbox.receive,
        send=inbox.send,
        prompt=inbox.prompt,
        wait_until_ready=True,
        instructions='Messages arrive as <channel source="inbox" chat_id="...">; answer with send_message.',
    )


def main() -> int:
    return channel_main("tests.fakes.inbox_channel", lambda: build_server(InboxSettings()))


if __name__ == "__main__":
    sys.exit(main())
