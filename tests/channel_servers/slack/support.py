"""The Slack channel in memory (``Client(build_server(...))``) against the Slack stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client

from channel_servers.slack.server import Slack, build_server
from channel_servers.slack.settings import SlackSettings
from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack

DM = "D0000001"
GENERAL = "C0000001"
ANA = "UANA0001"
BEN = "UBEN0001"


@dataclass
class Waits:
    """Every backoff the channel asked for, recorded instead of slept through."""

    seconds: list[float] = field(default_factory=list)

    async def __call__(self, delay: float) -> None:
        self.seconds.append(delay)


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
