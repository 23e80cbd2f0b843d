"""The Slack channel in memory (``Client(build_server(...))``) against the Slack stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client

from channel_servers.slack.server import Slack, build_server
from channel_servers.slack.settings import SlackSettings
from tests.channel_servers.support import Waits
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack

DM = "D0000001"
GENERAL = "C0000001"
ANA = "UANA0001"
BEN = "UBEN0001"


@dataclass
class Running:
    client: Client
    fake: FakeSlack
    slack: Slack
    waits: Waits


def settings_for(tmp_path: Path, base_url: str, **overrides: Any) -> SlackSettings:
    values: dict[str, Any] = {
        "state_dir": tmp_path,
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "api_base_url": base_url,
    }
    return SlackSettings(**(values | overrides))


@asynccontextmanager
async def slack_channel(
    tmp_path: Path, fake: FakeSlack | None = None, **overrides: Any
) -> AsyncIterator[Running]:
    fake = fake or FakeSlack()
    async with fake.serve() as base_url:
        waits = Waits()
        settings = settings_for(tmp_path, base_url, **overrides)
        slack = Slack(settings, sleep=waits)
        async with Client(build_server(settings, slack)) as client:
            yield Running(client, fake, slack, waits)


def dm(text: str, ts: str, *, user: str = ANA, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": DM,
        "channel_type": "im",
        "user": user,
        "text": text,
        "ts": ts,
    } | extra


def mention(text: str, ts: str, *, user: str = ANA, **extra: Any) -> dict[str, Any]:
    event = {"type": "app_mention", "channel": GENERAL, "user": user, "text": f"<@UBOT0001> {text}", "ts": ts}
    return event | extra
