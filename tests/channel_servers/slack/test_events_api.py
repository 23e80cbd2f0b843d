"""The Events API: the URL verification challenge, each event stored once however often Slack
retries it, and requests that are not Slack's own refused before anything reads them."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest
from pydantic import ValidationError

from tests.channel_servers.slack.support import DM, dm, mention, settings_for, slack_channel
from tests.channel_servers.support import pull
from tests.fakes.slack_api import SIGNING_SECRET, FakeSlack

pytestmark = pytest.mark.anyio

EVENTS = {"mode": "events", "signing_secret": SIGNING_SECRET, "events_port": 0}


async def test_the_url_verification_challenge_is_answered_only_when_signed(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, **EVENTS) as running:
        payload = {
            "token": "verification",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        }
        body, headers = fake.signed(payload)
        async with httpx2.AsyncClient() as http:
            genuine = await http.post(running.slack.events_url, content=body, headers=headers)
            _, forged_headers = fake.signed(payload, secret="not the signing secret")
            forged = await http.post(running.slack.events_url, content=body, headers=forged_headers)
            stale_body, stale = fake.signed(payload, now=time.time() - 301)
            old = await http.post(running.slack.events_url, content=stale_body, headers=stale)
    assert (genuine.status_code, genuine.json()) == (200, {"challenge": payload["challenge"]})
    assert [forged.status_code, old.status_code] == [401, 401]


async def test_each_event_delivered_one_to_four_times_is_handled_once(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, **EVENTS) as running:
        statuses = []
        for n, times in enumerate((1, 2, 3, 4, 4, 3, 2, 1), start=1):
            event = dm(f"m{n}", f"1700000000.{n:06d}") if n % 2 else mention(f"m{n}", f"1700000000.{n:06d}")
            statuses += await fake.deliver(running.slack.events_url, fake.event_callback(event), times=times)
        events = await pull(running.client, count=8)
        more = await pull(running.client, after=events[-1].seq, count=0)
        reply = await running.client.call_tool("send_message", {"text": "ok", "chat_id": DM})
    assert statuses == [200] * 20
    assert [event.payload["content"] for event in events] == [f"m{n}" for n in range(1, 9)]
    assert more == []
    assert reply.structured_content is not None
    assert reply.structured_content["status"] == "sent"


async def test_events_mode_needs_the_signing_secret(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="NEXO_SLACK_SIGNING_SECRET"):
        settings_for(tmp_path, "http://127.0.0.1:9/api", mode="events")
