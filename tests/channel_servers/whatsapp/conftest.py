"""The WhatsApp channel in process, talking to the Cloud API stand-in over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client

from channel_servers.whatsapp.server import WhatsApp, build_server
from channel_servers.whatsapp.settings import WhatsAppSettings
from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from tests.fakes.whatsapp_api import APP_SECRET, PHONE_NUMBER_ID, TOKEN, FakeWhatsApp, serve

VERIFY_TOKEN = "verify-me-0123"
OPERATOR = "15551230001"
CONTACT = "15551230002"


class ManualClock:
    def __init__(self, now: float = 1_790_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Running:
    client: Client
    whatsapp: WhatsApp
    fake: FakeWhatsApp
    http: httpx2.AsyncClient
    clock: ManualClock
    sleeps: list[float] = field(default_factory=list)

    @property
    def webhook(self) -> str:
        return self.whatsapp.url

    async def deliver(self, payload: dict[str, Any], times: int = 1) -> list[int]:
        return await self.fake.deliver(self.http, self.webhook, payload, times=times)

    async def contact_writes(self, text: str = "hi", wa_id: str = CONTACT) -> str:
        """The contact writes (opening the 24-hour window); returns once its read receipt went out."""
        payload = self.fake.text(wa_id, text)
        message_id = payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        assert await self.deliver(payload) == [200]
        await self.fake.wait_for(lambda fake: any(m.get("message_id") == message_id for m in fake.sent))
        return str(message_id)

    async def pull(self, after: int = 0) -> list[Event]:
        request = PullRequest(params=PullParams(after=after, wait_ms=0))
        return (await self.client.session.send_request(request, PullResult)).events

    async def send(self, text: str, chat_id: str = CONTACT, **arguments: Any) -> Any:
        return await self.client.call_tool("send_message", {"text": text, "chat_id": chat_id, **arguments})


def settings_for(tmp_path: Path, fake: FakeWhatsApp, **overrides: Any) -> WhatsAppSettings:
    values: dict[str, Any] = {
        "state_dir": tmp_path,
        "access_token": TOKEN,
        "app_secret": APP_SECRET,
        "verify_token": VERIFY_TOKEN,
        "phone_number_id": PHONE_NUMBER_ID,
        "api_base_url": fake.url,
        "port": 0,
        "approval_numbers": [OPERATOR],
        **overrides,
    }
    return WhatsAppSettings(**values)


@asynccontextmanager
async def running(tmp_path: Path, **overrides: Any) -> AsyncIterator[Running]:
    clock = ManualClock()
    fake = FakeWhatsApp(clock=clock)
    sleeps: list[float] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async with serve(fake), httpx2.AsyncClient() as http:
        settings = settings_for(tmp_path, fake, **overrides)
        whatsapp = WhatsApp(settings, clock=clock, sleep=record_sleep)
        async with Client(build_server(settings, whatsapp, clock=clock)) as client:
            yield Running(client, whatsapp, fake, http, clock, sleeps)
