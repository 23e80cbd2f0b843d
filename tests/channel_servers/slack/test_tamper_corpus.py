"""10,000 mutated signed Events API requests: each refused, nothing stored; genuine ones stored once.

The corpus starts from genuine signed deliveries (stored first) and changes one thing per request:
the signature or timestamp header dropped, signed with another secret, one hex digit of the
signature altered, a bit of the body flipped after signing, the timestamp moved (the signature then
no longer matches) or a correctly signed request older than the 5-minute window, and a correctly
signed body that is not JSON or not an Events API payload. Requests go straight into the endpoint's
ASGI app and the real store, so the whole corpus runs in seconds.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.types import ASGIApp

from channel_servers.slack.events_api import EVENTS_PATH
from tests.channel_servers.slack.support import dm, slack_channel
from tests.channel_servers.support import pull
from tests.channel_servers.tamper import alter_hex_digit, asgi_status, flip_bit
from tests.fakes.slack_api import SIGNING_SECRET, FakeSlack

pytestmark = pytest.mark.anyio

SEEDS = 20
TAMPERED = 10_000


async def call(app: ASGIApp, body: bytes, headers: dict[str, str]) -> int:
    return await asgi_status(app, "POST", EVENTS_PATH, body, headers, server_port=8794)


@dataclass(frozen=True)
class Tampered:
    mutation: str
    body: bytes
    headers: dict[str, str]
    expected: int


def corpus(rng: random.Random, seeds: list[tuple[bytes, dict[str, str]]]) -> list[Tampered]:
    def pick() -> tuple[bytes, dict[str, str]]:
        body, headers = rng.choice(seeds)
        return body, dict(headers)

    def dropped() -> Tampered:
        body, headers = pick()
        del headers[rng.choice(["x-slack-signature", "x-slack-request-timestamp"])]
        return Tampered("header dropped", body, headers, 401)

    def wrong_secret() -> Tampered:
        body, _ = pick()
        _, headers = FakeSlack.signed(json.loads(body), secret=SIGNING_SECRET + "x")
        return Tampered("wrong secret", body, headers, 401)

    def altered() -> Tampered:
        body, headers = pick()
        headers["x-slack-signature"] = alter_hex_digit(rng, headers["x-slack-signature"], "v0=")
        return Tampered("altered signature", body, headers, 401)

    def flipped() -> Tampered:
        body, headers = pick()
        return Tampered("body flipped after signing", flip_bit(rng, body), headers, 401)

    def moved() -> Tampered:
        body, headers = pick()
        headers["x-slack-request-timestamp"] = str(
            int(headers["x-slack-request-timestamp"]) + rng.randint(1, 600)
        )
        return Tampered("timestamp moved", body, headers, 401)

    def stale() -> Tampered:
        body, _ = pick()
        old, headers = FakeSlack.signed(json.loads(body), now=time.time() - rng.randint(301, 86_400))
        return Tampered("signed too long ago", old, headers, 401)

    def not_json() -> Tampered:
        payload = rng.choice([b"", b"{", b"[1, 2", b"\xff\xfe", b'{"type": "event_callback"'])
        body, headers = FakeSlack.signed_bytes(payload)
        return Tampered("signed, not JSON", body, headers, 400)

    def wrong_shape() -> Tampered:
        payload = rng.choice(
            [
                [],
                {"type": "event_callback"},
                {"type": "event_callback", "event": "x"},
                {"type": "app_rate_limited"},
                {"type": "url_verification"},
            ]
        )
        body, headers = FakeSlack.signed(payload)
        return Tampered("signed, wrong shape", body, headers, 400)

    mutations: list[Callable[[], Tampered]] = [
        dropped,
        wrong_secret,
        altered,
        flipped,
        moved,
        stale,
        not_json,
        wrong_shape,
        flipped,
        altered,
    ]
    return [mutations[i % len(mutations)]() for i in range(TAMPERED)]


async def test_ten_thousand_tampered_requests_are_all_refused_and_none_is_stored(tmp_path: Path) -> None:
    rng = random.Random(20261126)
    fake = FakeSlack()
    async with slack_channel(
        tmp_path, fake, mode="events", signing_secret=SIGNING_SECRET, events_port=0
    ) as running:
        app = running.slack.events_app
        assert app is not None
        seeds = [
            fake.signed(fake.event_callback(dm(f"genuine {n}", f"1700000000.{n:06d}"))) for n in range(SEEDS)
        ]
        seeded = [await call(app, body, headers) for body, headers in seeds]
        requests = corpus(rng, seeds)
        got: Counter[tuple[str, int]] = Counter()
        for request in requests:
            got[(request.mutation, await call(app, request.body, request.headers))] += 1
        events = await pull(running.client, count=SEEDS)
        more = await pull(running.client, after=events[-1].seq, count=0)
    assert len(requests) >= 10_000
    assert seeded == [200] * SEEDS
    assert got == Counter((request.mutation, request.expected) for request in requests)
    assert [event.payload["content"] for event in events] == [f"genuine {n}" for n in range(SEEDS)]
    assert more == []
