"""The Chirp channel: Chirp calls our webhook for each message; we answer through Chirp's HTTP API."""

from __future__ import annotations

import hmac
from typing import Any

import httpx2
from mcp.server import MCPServer
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from docs.examples.chirp.settings import ChirpSettings
from shared.channelkit import (
    Channel,
    EventLogFull,
    SendFailed,
    Unreachable,
    channel_main,
    define_channel,
    serve_asgi,
)


class ChirpMessage(BaseModel):
    """The body of Chirp's webhook call."""

    message_id: str
    chat_id: str
    sender: str
    text: str


class Chirp:
    def __init__(self, settings: ChirpSettings, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self.transport = transport  # tests pass a fake Chirp here
        self.http: httpx2.AsyncClient | None = None
        self.url = ""

    # --8<-- [start:receive]
    async def receive(self, channel: Channel) -> None:
        secret = self.settings.secret.get_secret_value().encode()

        async def webhook(request: Request) -> Response:
            if not hmac.compare_digest(request.headers.get("x-chirp-secret", "").encode(), secret):
                return Response(status_code=401)
            try:
                message = ChirpMessage.model_validate_json(await request.body())
                meta = {
                    "chat_id": message.chat_id,
                    "message_id": message.message_id,
                    "user_id": message.sender,
                }
                await channel.inbound(message.text, meta, f"{message.chat_id}:{message.message_id}")
            except ValidationError:
                return Response(status_code=400)
            except EventLogFull:
                return Response(status_code=503)  # Chirp retries later
            # 200 only now, with the message on disk; then send what waited for this chat.
            return Response(status_code=200, background=BackgroundTask(channel.flush, message.chat_id))

        async def listening(host: str, port: int) -> None:
            self.url = f"http://{host}:{port}/chirp"
            channel.ready()

        app = Starlette(routes=[Route("/chirp", webhook, methods=["POST"])])
        async with httpx2.AsyncClient(base_url=self.settings.api_url, transport=self.transport) as http:
            self.http = http
            await serve_asgi(app, self.settings.host, self.settings.port, on_ready=listening)

    # --8<-- [end:receive]

    # --8<-- [start:send]
    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        assert self.http is not None
        try:
            response = await self.http.post(
                f"/chats/{chat_id}/messages", json={"text": text, "reply_to": reply_to}
            )
        except httpx2.ConnectError as exc:
            raise Unreachable(f"cannot reach Chirp: {exc}") from exc  # nothing left this machine
        if response.status_code == 503:
            raise Unreachable("Chirp is down for maintenance")
        if response.status_code in (400, 404):
            raise SendFailed(f"Chirp answered HTTP {response.status_code}: {response.text or 'no details'}")
        response.raise_for_status()  # anything else: the kit records the message as uncertain
        return str(response.json()["id"])

    # --8<-- [end:send]


# --8<-- [start:build]
def build_server(settings: ChirpSettings, chirp: Chirp | None = None) -> MCPServer[Any]:
    chirp = chirp or Chirp(settings)
    return define_channel(
        "chirp",
        settings=settings,
        receive=chirp.receive,
        send=chirp.send,
        wait_until_ready=True,
        instructions=(
            'Chirp messages arrive as <channel source="chirp" chat_id="..." ...>. '
            "Answer with the send_message tool, passing the chat_id from the tag."
        ),
    )


def main() -> int:
    return channel_main("docs.examples.chirp", lambda: build_server(ChirpSettings()))


# --8<-- [end:build]
