"""The Telegram channel in memory (``Client(build_server(...))``) against the Bot API stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from channel_servers.telegram.server import Telegram, build_server
from channel_servers.telegram.settings import TelegramSettings
from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from tests.fakes.telegram_api import TOKEN, FakeTelegram


@dataclass
class Waits:
    """Every backoff the channel asked for, recorded instead of slept through; a test that needs the
    channel to stay paused sets ``hold`` and releases it."""

    seconds: list[float] = field(default_factory=list)
    hold: anyio.Event | None = None
    paused: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, delay: float) -> None:
        self.seconds.append(delay)
        self.paused.set()
        if self.hold is not None:
            await self.hold.wait()


@dataclass
class Running:
    client: Client
    fake: FakeTelegram
    telegram: Telegram
    waits: Waits


def settings_for(tmp_path: Path, base_url: str, **overrides: Any) -> TelegramSettings:
    values: dict[str, Any] = {
        "state_dir": tmp_path,
        "bot_token": TOKEN,
        "api_base_url": base_url,
        "poll_timeout_s": 5,
    }
    return TelegramSettings(**(values | overrides))


@asynccontextmanager
async def telegram_channel(
    tmp_path: Path, fake: FakeTelegram | None = None, **overrides: Any
) -> AsyncIterator[Running]:
    fake = fake or FakeTelegram()
    async with fake.serve() as base_url:
        waits = Waits()
        settings = settings_for(tmp_path, base_url, **overrides)
        telegram = Telegram(settings, sleep=waits)
        async with Client(build_server(settings, telegram)) as client:
            yield Running(client, fake, telegram, waits)


async def pull(client: Client, after: int = 0, count: int = 1) -> list[Event]:
    """At least ``count`` events after ``after`` (each pull waits up to 5 s for one); with
    ``count=0``, what arrives within a short bounded wait (to show that nothing more came)."""
    events: list[Event] = []
    while True:
        request = PullRequest(params=PullParams(after=after, wait_ms=5000 if count else 200))
        batch = (await client.session.send_request(request, PullResult)).events
        events.extend(batch)
        if not batch or len(events) >= count:
            return events
        after = batch[-1].seq
