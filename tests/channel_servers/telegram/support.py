"""The Telegram channel in memory (``Client(build_server(...))``) against the Bot API stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client

from channel_servers.telegram.server import Telegram, build_server
from channel_servers.telegram.settings import TelegramSettings
from tests.channel_servers.support import Waits
from tests.fakes.telegram_api import TOKEN, FakeTelegram


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
