"""Webhook mode: Telegram's posts are checked by their secret header, stored once, then answered 200.

The tamper corpus goes in-process straight into the channel's ASGI app and its real event log: 10,000
requests, each changing one thing of a genuine delivery (the secret header missing or altered, the
body altered or cut, not an update at all), all refused with nothing stored; genuine deliveries
and their replays are stored once each.
"""

from __future__ import annotations

import json
import random
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Message

from channel_servers.telegram.receive import SECRET_HEADER, WEBHOOK_PATH
from tests.channel_servers.support import pull
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.anyio

SECRET = "s3cret-Token_for-the-webhook-0123456789"
ANA = 5550001
GENUINE = 40
TAMPERED = 10_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def webhook_settings(port: int = 0) -> dict[str, Any]:
    return {
        "mode": "webhook",
        "webhook_url": f"http://127.0.0.1:{port}{WEBHOOK_PATH}",
        "webhook_secret": SECRET,
        "webhook_port": port,
    }


async def test_telegram_posts_reach_the_channel_after_set_webhook(tmp_path: Path) -> None:
    port = free_port()
    fake = FakeTelegram()
    async with telegram_channel(tmp_path, fake, **webhook_settings(port)) as running:
        [registered] = fake.calls_of("setWebhook")
        fake.inject(fake.message(ANA, "via webhook"), times=2)
        events = await pull(running.client)
        await fake.called("setWebhook")
    assert registered["url"] == f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
    assert registered["secret_token"] == SECRET
    assert [event.payload["content"] for event in events] == ["via webhook"]
    assert fake.calls_of("getUpdates") == []


async def test_polling_again_deletes_the_webhook_first(tmp_path: Path) -> None:
    fake = FakeTelegram()
    async with telegram_channel(tmp_path / "webhook", fake, **webhook_settings()):
        registered = fake.webhook
    async with telegram_channel(tmp_path / "polling", fake) as running:
        fake.inject(fake.message(ANA, "polled again"))
        events = await pull(running.client)
        after = fake.webhook
    assert registered is not None
    assert after is None
    assert [event.payload["content"] for event in events] == ["polled again"]


async def post(app: ASGIApp, body: bytes, headers: dict[str, str]) -> int:
    """One POST straight into the ASGI app (no client, no socket: the corpus is about the checks)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": WEBHOOK_PATH,
        "raw_path": WEBHOOK_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(key.lower().encode(), value.encode()) for key, value in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8793),
    }
    status: list[int] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    return status[0]


def mutations(rng: random.Random, body: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """(what changed, headers, body): every one must be refused."""
    good = {SECRET_HEADER: SECRET}
    flipped = bytearray(body)
    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(7)
    position = rng.randrange(len(SECRET))
    altered = (
        SECRET[:position]
        + chr((ord(SECRET[position]) + rng.randrange(1, 60)) % 95 + 32)
        + SECRET[position + 1 :]
    )
    return [
        ("no secret", {}, body),
        ("secret altered", {SECRET_HEADER: altered}, body),
        ("secret cut", {SECRET_HEADER: SECRET[: rng.randrange(len(SECRET))]}, body),
        ("secret extended", {SECRET_HEADER: SECRET + rng.choice("aZ0_-")}, body),
        ("body changed, no secret", {}, bytes(flipped)),
        ("body changed, secret altered", {SECRET_HEADER: altered}, bytes(flipped)),
        ("body cut", good, body[: rng.randrange(1, len(body) - 1)]),
        ("not an update", good, json.dumps(rng.choice([[1], "x", 3, {"message": {}}, None])).encode()),
        ("update id not a number", good, body.replace(b'"update_id": ', b'"update_id": "', 1)),
        ("empty", good, b""),
    ]


async def test_tampered_requests_are_refused_and_store_nothing(tmp_path: Path) -> None:
    rng = random.Random(20_261_126)
    async with telegram_channel(tmp_path, **webhook_settings()) as running:
        app = running.telegram.webhook_app
        assert app is not None
        fake = running.fake
        genuine = [
            json.dumps({"update_id": 9000 + n, **fake.message(ANA, f"m{n}")}).encode() for n in range(GENUINE)
        ]
        statuses: Counter[tuple[str, int]] = Counter()
        for body in genuine:
            for _ in range(2):  # Telegram's retry of an answer it did not see
                status = await post(app, body, {SECRET_HEADER: SECRET})
                statuses[("genuine", status)] += 1
        for _ in range(TAMPERED // 10):
            for what, headers, body in mutations(rng, rng.choice(genuine)):
                status = await post(app, body, headers)
                statuses[(what.split(",")[0] if "secret" in what else "refused", status)] += 1
        events = await pull(running.client, count=GENUINE)
        more = await pull(running.client, after=events[-1].seq, count=0)
    assert sorted(event.payload["content"] for event in events) == sorted(f"m{n}" for n in range(GENUINE))
    assert more == []
    assert sum(count for (what, _), count in statuses.items() if what != "genuine") == TAMPERED
    assert {status for (what, status) in statuses if what != "genuine"} <= {400, 401}
    assert statuses[("genuine", 200)] == 2 * GENUINE
