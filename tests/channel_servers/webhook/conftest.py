"""Shared pieces of the webhook tests: sources of every scheme, a manual clock, independent signers.

The signers here are written from the providers' published formats, separately from the server's
verifiers, so a test passes only when both readings of a format agree.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from starlette.types import ASGIApp

from channel_servers.webhook.server import build_server
from channel_servers.webhook.settings import WebhookSettings
from shared.protocol.events import (
    AckParams,
    AckRequest,
    AckResult,
    Event,
    PullParams,
    PullRequest,
    PullResult,
)

START = 1_800_000_000.0
STANDARD_KEY = b"standard webhooks key bytes"
ENV = {
    "GITHUB_SECRET": "It's a Secret to Everybody",
    "STRIPE_SECRET": "whsec_stripe_endpoint_secret",
    "SLACK_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
    "STANDARD_SECRET": "whsec_" + base64.b64encode(STANDARD_KEY).decode(),
    "HMAC256_SECRET": "hmac-256-secret",
    "HMAC1_SECRET": "hmac-1-secret",
    "TOKEN_SECRET": "token-0123456789abcdef",
}
SOURCES: list[dict[str, Any]] = [
    {"name": "github", "path": "/hooks/github", "scheme": "github", "secret_env": "GITHUB_SECRET"},
    {"name": "stripe", "path": "/hooks/stripe", "scheme": "stripe", "secret_env": "STRIPE_SECRET"},
    {"name": "slack", "path": "/hooks/slack", "scheme": "slack", "secret_env": "SLACK_SECRET"},
    {
        "name": "standard",
        "path": "/hooks/standard",
        "scheme": "standard-webhooks",
        "secret_env": "STANDARD_SECRET",
        "chat_id": "billing",
    },
    {
        "name": "ci",
        "path": "/hooks/ci",
        "scheme": "hmac-sha256",
        "secret_env": "HMAC256_SECRET",
        "signature_header": "X-Signature",
        "signature_prefix": "sha256=",
        "delivery_id": "X-Delivery",
        "event_kind": "$.event",
    },
    {
        "name": "legacy",
        "path": "/hooks/legacy",
        "scheme": "hmac-sha1",
        "secret_env": "HMAC1_SECRET",
        "signature_header": "X-Signature-SHA1",
        "delivery_id": "$.delivery",
    },
    {
        "name": "alerts",
        "path": "/hooks/alerts",
        "scheme": "token",
        "secret_env": "TOKEN_SECRET",
        "delivery_id": "X-Delivery",
        "event_kind": "X-Event",
    },
]
NAMES = tuple(source["name"] for source in SOURCES)
TIMESTAMPED = ("stripe", "slack", "standard")


@dataclass
class ManualClock:
    """Unix seconds that move only when a test says so."""

    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings(tmp_path: Path) -> WebhookSettings:
    return WebhookSettings(state_dir=tmp_path / "state", sources=SOURCES, port=0)


def body_for(name: str, delivery: str, note: str = "") -> bytes:
    """A realistic payload for a source; ids that live in the body are put there."""
    documents: dict[str, dict[str, Any]] = {
        "github": {"action": "opened", "issue": {"number": 7, "title": f"crash in {delivery} {note}"}},
        "stripe": {
            "id": delivery,
            "type": "invoice.paid",
            "data": {"object": {"amount": 1200, "note": note}},
        },
        "slack": {
            "type": "event_callback",
            "event_id": delivery,
            "event": {"type": "app_mention", "text": f"<@U1> deploy? {note}"},
        },
        "standard": {"type": "user.created", "data": {"id": "u_1", "note": note}},
        "ci": {"event": "build.failed", "build": delivery, "note": note},
        "legacy": {"delivery": delivery, "status": "down", "note": note},
        "alerts": {"alert": "disk full", "host": "db-1", "ref": delivery, "note": note},
    }
    return json.dumps(documents[name]).encode()


def _hmac_hex(secret: bytes, message: bytes, digest: str = "sha256") -> str:
    return hmac.new(secret, message, digest).hexdigest()


def sign(
    name: str, body: bytes, delivery: str, ts: float, secrets: Mapping[str, str] = ENV
) -> dict[str, str]:
    """The headers the real provider would send for this body."""
    stamp = str(int(ts))
    if name == "github":
        signature = "sha256=" + _hmac_hex(secrets["GITHUB_SECRET"].encode(), body)
        return {"X-Hub-Signature-256": signature, "X-GitHub-Delivery": delivery, "X-GitHub-Event": "issues"}
    if name == "stripe":
        v1 = _hmac_hex(secrets["STRIPE_SECRET"].encode(), f"{stamp}.".encode() + body)
        return {"Stripe-Signature": f"t={stamp},v1={v1},v0=deadbeef"}
    if name == "slack":
        v0 = _hmac_hex(secrets["SLACK_SECRET"].encode(), f"v0:{stamp}:".encode() + body)
        return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={v0}"}
    if name == "standard":
        key = base64.b64decode(secrets["STANDARD_SECRET"].removeprefix("whsec_"))
        mac = hmac.new(key, f"{delivery}.{stamp}.".encode() + body, hashlib.sha256).digest()
        rotated_out = base64.b64encode(b"signature under a retired key").decode()
        return {
            "webhook-id": delivery,
            "webhook-timestamp": stamp,
            "webhook-signature": f"v1,{rotated_out} v1,{base64.b64encode(mac).decode()}",
        }
    if name == "ci":
        signature = "sha256=" + _hmac_hex(secrets["HMAC256_SECRET"].encode(), body)
        return {"X-Signature": signature, "X-Delivery": delivery}
    if name == "legacy":
        mac = hmac.new(secrets["HMAC1_SECRET"].encode(), body, hashlib.sha1).digest()
        return {"X-Signature-SHA1": base64.b64encode(mac).decode()}
    assert name == "alerts"
    return {"Authorization": f"Bearer {secrets['TOKEN_SECRET']}", "X-Delivery": delivery, "X-Event": "disk"}


def path_of(name: str) -> str:
    return f"/hooks/{name}"


@dataclass
class Captured:
    """A listener that serves nothing: it keeps the app so tests reach it through httpx2's ASGI transport."""

    apps: list[ASGIApp] = field(default_factory=list)

    @asynccontextmanager
    async def __call__(self, app: ASGIApp) -> AsyncIterator[str]:
        self.apps.append(app)
        yield "http://webhook.test"


@dataclass
class Connected:
    client: Client
    http: httpx2.AsyncClient

    async def post(self, name: str, body: bytes, headers: Mapping[str, str]) -> httpx2.Response:
        return await self.http.post(path_of(name), content=body, headers=dict(headers))

    async def pull(self, after: int = 0) -> PullResult:
        return await self.client.session.send_request(
            PullRequest(params=PullParams(after=after, limit=500, wait_ms=10_000)), PullResult
        )

    async def events(self) -> list[Event]:
        return (await self.pull()).events

    async def ack(self, seqs: list[int]) -> int:
        result = await self.client.session.send_request(AckRequest(params=AckParams(seqs=seqs)), AckResult)
        return result.acked


@asynccontextmanager
async def connected(
    settings: WebhookSettings, clock: ManualClock, environ: Mapping[str, str] = ENV, **client: Any
) -> AsyncIterator[Connected]:
    captured = Captured()
    server = build_server(settings, environ=environ, listener=captured, clock=clock)
    async with Client(server, **client) as mcp_client:
        transport = httpx2.ASGITransport(app=captured.apps[0])
        async with httpx2.AsyncClient(transport=transport, base_url="http://webhook.test") as http:
            yield Connected(mcp_client, http)
