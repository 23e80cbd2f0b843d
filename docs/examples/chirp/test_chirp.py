"""Tests of the Chirp channel: a fake Chirp API, real webhook calls, the MCP protocol in memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from docs.examples.chirp.server import Chirp, build_server
from docs.examples.chirp.settings import ChirpSettings
from shared.protocol.events import PullParams, PullRequest, PullResult

WEBHOOK_KEY = "test-key"
MESSAGE = {"message_id": "m1", "chat_id": "c1", "sender": "ana", "text": "hi"}


# --8<-- [start:fake]
class FakeChirp:
    """Chirp's API as far as the channel uses it: it records each post and answers like Chirp."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, dict[str, object]]] = []
        self.status = 201
        self.delivered = anyio.Event()

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if self.status != 201:
            return httpx2.Response(self.status)
        self.posted.append((request.url.path, json.loads(request.content)))
        self.delivered.set()
        return httpx2.Response(201, json={"id": len(self.posted)})


@asynccontextmanager
async def chirp_channel(tmp_path: Path) -> AsyncIterator[tuple[Client, Chirp, FakeChirp]]:
    fake = FakeChirp()
    settings = ChirpSettings(state_dir=tmp_path, api_url="https://chirp.test/api", secret=WEBHOOK_KEY, port=0)
    chirp = Chirp(settings, transport=httpx2.MockTransport(fake.handle))
    async with Client(build_server(settings, chirp)) as client:
        yield client, chirp, fake


async def webhook(chirp: Chirp, body: dict[str, str], key: str = WEBHOOK_KEY) -> int:
    async with httpx2.AsyncClient() as http:
        response = await http.post(chirp.url, json=body, headers={"x-chirp-secret": key})
    return response.status_code


# --8<-- [end:fake]


# --8<-- [start:inbound]
@pytest.mark.anyio
async def test_a_webhook_message_becomes_one_durable_event(tmp_path: Path) -> None:
    async with chirp_channel(tmp_path) as (client, chirp, _):
        statuses = [
            await webhook(chirp, MESSAGE),
            await webhook(chirp, MESSAGE),  # Chirp retried: stored once
            await webhook(chirp, MESSAGE, key="wrong"),
            await webhook(chirp, {"text": "no ids"}),
        ]
        pulled = await client.session.send_request(PullRequest(params=PullParams(wait_ms=1000)), PullResult)
    assert statuses == [200, 200, 401, 400]
    assert [(event.dedupe_key, event.payload) for event in pulled.events] == [
        ("c1:m1", {"content": "hi", "meta": {"chat_id": "c1", "message_id": "m1", "user_id": "ana"}})
    ]


# --8<-- [end:inbound]


# --8<-- [start:outbound]
@pytest.mark.anyio
async def test_a_reply_is_posted_once_however_often_it_is_retried(tmp_path: Path) -> None:
    async with chirp_channel(tmp_path) as (client, _, fake):
        arguments = {"text": "hello", "chat_id": "c1", "reply_to": "m1", "idempotency_key": "reply-1"}
        first = await client.call_tool("send_message", arguments)
        again = await client.call_tool("send_message", arguments)
    assert first.structured_content == {
        "status": "sent",
        "message_id": "1",
        "platform_message_id": "1",
        "state": "sent",
    }
    assert again.structured_content is not None
    assert again.structured_content["status"] == "duplicate"
    assert fake.posted == [("/api/chats/c1/messages", {"text": "hello", "reply_to": "m1"})]


@pytest.mark.anyio
async def test_while_chirp_is_down_a_reply_waits_for_the_chat_to_write_again(tmp_path: Path) -> None:
    async with chirp_channel(tmp_path) as (client, chirp, fake):
        fake.status = 503
        queued = await client.call_tool("send_message", {"text": "later", "chat_id": "c1"})
        fake.status = 201
        await webhook(chirp, MESSAGE)
        with anyio.fail_after(5):
            await fake.delivered.wait()
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"
    assert fake.posted == [("/api/chats/c1/messages", {"text": "later", "reply_to": None})]


@pytest.mark.anyio
async def test_a_message_chirp_refuses_is_reported_to_the_model(tmp_path: Path) -> None:
    async with chirp_channel(tmp_path) as (client, _, fake):
        fake.status = 404
        result = await client.call_tool("send_message", {"text": "hello", "chat_id": "nobody"})
    assert result.is_error
    assert [getattr(block, "text", "").split(";")[0] for block in result.content] == [
        "Error executing tool send_message: message 1 to chat 'nobody' was refused "
        "(Chirp answered HTTP 404: no details)"
    ]


# --8<-- [end:outbound]
