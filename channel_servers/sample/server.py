"""The sample channel: a local web page chatting with the agent over a WebSocket, built on the kit.

Each browser tab is one chat (its ``chat_id`` lives in the tab's sessionStorage). The page and the
socket need the token from the URL printed on start, so other local users cannot chat.
"""

from __future__ import annotations

import hmac
import importlib.util
import re
import sys
import uuid
from importlib import resources
from typing import Any

from mcp.server import MCPServer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketDisconnected

from channel_servers.sample.settings import NAME, SampleSettings
from shared.channelkit import (
    Channel,
    EventLogFull,
    Unreachable,
    channel_main,
    define_channel,
    serve_asgi,
)
from shared.net import is_loopback
from shared.protocol.channel import PermissionRequestParams

CHAT_ID = r"^[A-Za-z0-9_-]{1,64}$"


class Say(BaseModel):
    """What the page sends: one message typed in a tab."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=CHAT_ID)
    text: str = Field(min_length=1, max_length=16_000)


def approval(params: PermissionRequestParams) -> dict[str, Any]:
    return {"type": "approval", **params.model_dump(mode="json", exclude_none=True)}


class WebChat:
    """The platform side: the page, and the open sockets of each chat."""

    def __init__(self, settings: SampleSettings) -> None:
        self.settings = settings
        self.sockets: dict[str, set[WebSocket]] = {}
        self.url = ""
        self._token = ""
        self._channel: Channel | None = None

    async def receive(self, channel: Channel) -> None:
        self._channel, self._token = channel, self.settings.resolve_token()
        app = Starlette(routes=[Route("/", self.page), WebSocketRoute("/ws", self.chat)])
        await serve_asgi(
            app, self.settings.host, self.settings.port, on_ready=self._ready, setting="NEXO_SAMPLE_PORT"
        )

    async def _ready(self, host: str, port: int) -> None:
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}/?token={self._token}"
        print(f"{NAME} channel: open {self.url}", file=sys.stderr, flush=True)
        assert self._channel is not None
        self._channel.ready()

    def _allowed(self, connection: HTTPConnection) -> bool:
        host = connection.headers.get("host", "")
        origin = connection.headers.get("origin")  # browsers always send it; a foreign page is refused
        presented = connection.query_params.get("token", "")
        return (
            is_loopback(host.rpartition(":")[0] or host)
            and origin in (None, f"http://{host}")
            and hmac.compare_digest(presented.encode(), self._token.encode())
        )

    async def page(self, request: Request) -> Response:
        if not self._allowed(request):
            return PlainTextResponse(f"open the URL the {NAME} channel printed on start", status_code=403)
        return HTMLResponse((resources.files(__package__) / "static" / "index.html").read_text())

    async def chat(self, socket: WebSocket) -> None:
        chat_id = socket.query_params.get("chat", "")
        if not self._allowed(socket) or not re.fullmatch(CHAT_ID, chat_id):
            await socket.close(code=1008)  # before accept: the handshake is refused with 403
            return
        assert self._channel is not None
        await socket.accept()
        self.sockets.setdefault(chat_id, set()).add(socket)
        try:
            await socket.send_json({"type": "welcome", "chat_id": chat_id})
            for prompt in self._channel.open_prompts():
                await socket.send_json(approval(prompt))
            await self._channel.flush(chat_id)
            async for frame in socket.iter_json():
                await socket.send_json(await self._said(chat_id, frame))
        except (WebSocketDisconnect, WebSocketDisconnected):
            pass  # the tab went away; its replies wait in the outbox
        finally:
            sockets = self.sockets.get(chat_id, set())
            sockets.discard(socket)
            if not sockets:
                self.sockets.pop(chat_id, None)

    async def _said(self, chat_id: str, frame: Any) -> dict[str, Any]:
        assert self._channel is not None
        try:
            say = Say.model_validate(frame)
            meta = {"chat_id": chat_id, "message_id": say.id, "user_id": "operator"}
            received = await self._channel.inbound(say.text, meta, f"{chat_id}:{say.id}")
        except ValidationError as exc:
            return {"type": "error", "message": f"bad frame: {exc.errors()[0]['msg']}"}
        except EventLogFull as exc:
            return {"type": "error", "message": str(exc)}
        kind = "queued" if received.kind == "message" else "verdict"
        return {"type": kind, "id": say.id, "seq": received.seq, "duplicate": not received.new}

    async def _push(self, sockets: set[WebSocket], frame: dict[str, Any]) -> int:
        reached = 0
        for socket in list(sockets):
            try:
                await socket.send_json(frame)
                reached += 1
            except (WebSocketDisconnect, WebSocketDisconnected):
                sockets.discard(socket)  # closed under us; the message waits for the next connection
        return reached

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        message_id = uuid.uuid4().hex
        frame = {"type": "reply", "id": message_id, "text": text, "reply_to": reply_to}
        if not await self._push(self.sockets.get(chat_id, set()), frame):
            raise Unreachable(f"no browser tab of chat {chat_id!r} is open")
        return message_id

    async def prompt(self, params: PermissionRequestParams) -> int:
        return sum([await self._push(sockets, approval(params)) for sockets in list(self.sockets.values())])


def build_server(settings: SampleSettings, web: WebChat | None = None) -> MCPServer[Any]:
    if importlib.util.find_spec("websockets") is None:
        raise RuntimeError(f"the {NAME} channel serves a WebSocket: install it with `pip install websockets`")
    web = web or WebChat(settings)
    return define_channel(
        NAME,
        settings=settings,
        receive=web.receive,
        send=web.send,
        prompt=web.prompt,
        wait_until_ready=True,
        instructions=(
            f'Messages typed in the operator\'s local web chat arrive as <channel source="{NAME}" ...>. '
            "Reply with the send_message tool, passing the chat_id from the tag."
        ),
    )


def main() -> int:
    return channel_main(f"channel_servers.{NAME}", lambda: build_server(SampleSettings()))
