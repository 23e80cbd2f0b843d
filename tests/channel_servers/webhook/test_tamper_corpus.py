"""Over 10,000 tampered requests across every scheme: each one refused, none stored.

The corpus starts from genuine deliveries (stored first) and changes one thing per request: a bit
of the body, the secret, a header removed or one character of a signed header altered, a stale or
future timestamp (correctly signed, as if the sender's clock were wrong or a capture replayed), or
the delivery id sent again, correctly signed, with another body. Requests go in-process through
the ASGI app and the real store, so the whole corpus runs in seconds.
"""

from __future__ import annotations

import base64
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from channel_servers.webhook.settings import WebhookSettings
from tests.channel_servers.webhook.conftest import (
    ENV,
    NAMES,
    SOURCES,
    STANDARD_KEY,
    START,
    ManualClock,
    body_for,
    connected,
    sign,
)

pytestmark = pytest.mark.anyio

SEEDS_PER_SOURCE = 12
TAMPERED_PER_SOURCE = 1_500
WRONG = {
    "GITHUB_SECRET": "It's a Secret to Everybody!",
    "STRIPE_SECRET": "whsec_someone_elses_secret",
    "SLACK_SECRET": "0" * 32,
    "STANDARD_SECRET": "whsec_" + base64.b64encode(STANDARD_KEY[::-1]).decode(),
    "HMAC256_SECRET": "hmac-256-secreT",
    "HMAC1_SECRET": "",
    "TOKEN_SECRET": "token-0123456789abcdeF",
}
SIGNED_HEADERS = {
    "github": ("X-Hub-Signature-256",),
    "stripe": ("Stripe-Signature",),
    "slack": ("X-Slack-Signature", "X-Slack-Request-Timestamp"),
    "standard": ("webhook-id", "webhook-timestamp", "webhook-signature"),
    "ci": ("X-Signature",),
    "legacy": ("X-Signature-SHA1",),
    "alerts": ("Authorization",),
}
ID_HEADERS = {"github": ("X-GitHub-Delivery",), "ci": ("X-Delivery",), "alerts": ("X-Delivery",)}
TIMESTAMPED = ("stripe", "slack", "standard")
PLAIN = "0123456789abcdefXYZ=,.-_"


@dataclass(frozen=True)
class Tampered:
    name: str
    mutation: str
    body: bytes
    headers: dict[str, str]
    expected: int


def genuine_headers(
    name: str, body: bytes, delivery: str, ts: float, secrets: Mapping[str, str] = ENV
) -> dict[str, str]:
    """Provider headers without decoys (Stripe's v0, a retired Standard Webhooks key), so that every
    character of a signed header matters."""
    headers = sign(name, body, delivery, ts, secrets)
    if name == "stripe":
        headers["Stripe-Signature"] = headers["Stripe-Signature"].removesuffix(",v0=deadbeef")
    if name == "standard":
        headers["webhook-signature"] = headers["webhook-signature"].split()[-1]
    return headers


def flip_bit(rng: random.Random, body: bytes) -> bytes:
    index = rng.randrange(len(body))
    return body[:index] + bytes([body[index] ^ (1 << rng.randrange(8))]) + body[index + 1 :]


def alter(rng: random.Random, value: str) -> str:
    index = rng.randrange(len(value))
    # Never the same letter in the other case: hex digests are compared case-insensitively.
    choices = [c for c in PLAIN if c.lower() != value[index].lower()]
    return value[:index] + rng.choice(choices) + value[index + 1 :]


def corpus(rng: random.Random) -> list[Tampered]:
    tampered: list[Tampered] = []
    for name in NAMES:
        mutations: list[Callable[[str, bytes, dict[str, str]], Tampered]] = []

        def flipped(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
            # A token does not cover the body: the changed body is caught as a reused delivery id.
            expected = 409 if name == "alerts" else 401
            return Tampered(name, "flipped body bit", flip_bit(rng, body), headers, expected)

        def wrong_secret(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
            return Tampered(
                name, "wrong secret", body, genuine_headers(name, body, delivery, START, WRONG), 401
            )

        def missing(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
            header = rng.choice(SIGNED_HEADERS[name] + ID_HEADERS.get(name, ()))
            kept = {key: value for key, value in headers.items() if key != header}
            # Without a signed header nothing is verified (401); without the id it cannot be stored (400).
            return Tampered(
                name, "missing header", body, kept, 400 if header in ID_HEADERS.get(name, ()) else 401
            )

        def altered(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
            header = rng.choice(SIGNED_HEADERS[name])
            return Tampered(
                name, "altered header", body, {**headers, header: alter(rng, headers[header])}, 401
            )

        def replayed(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
            changed = body_for(name, delivery, note=f"tampered {rng.random()}")
            return Tampered(
                name, "replayed id, new body", changed, genuine_headers(name, changed, delivery, START), 409
            )

        mutations += [flipped, wrong_secret, missing, altered, replayed]
        if name in TIMESTAMPED:

            def stale(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
                ts = START - rng.randint(301, 86_400 * 30)
                return Tampered(name, "stale timestamp", body, genuine_headers(name, body, delivery, ts), 400)

            def future(delivery: str, body: bytes, headers: dict[str, str], name: str = name) -> Tampered:
                ts = START + rng.randint(301, 86_400 * 30)
                return Tampered(
                    name, "future timestamp", body, genuine_headers(name, body, delivery, ts), 400
                )

            mutations += [stale, future]
        for i in range(TAMPERED_PER_SOURCE):
            delivery = f"{name}-seed-{rng.randrange(SEEDS_PER_SOURCE)}"
            body = body_for(name, delivery)
            tampered.append(
                mutations[i % len(mutations)](delivery, body, genuine_headers(name, body, delivery, START))
            )
    return tampered


async def test_ten_thousand_tampered_requests_are_all_refused_and_none_is_stored(
    tmp_path: Path, clock: ManualClock
) -> None:
    generous = [{**entry, "rate_per_minute": 1_000_000} for entry in SOURCES]
    settings = WebhookSettings(state_dir=tmp_path, sources=generous, port=0)
    requests = corpus(random.Random(20261121))
    assert len(requests) >= 10_000
    got: Counter[tuple[str, str, int]] = Counter()
    async with connected(settings, clock, ENV) as hooks:
        seeded = []
        for name in NAMES:
            for seed in range(SEEDS_PER_SOURCE):
                delivery = f"{name}-seed-{seed}"
                body = body_for(name, delivery)
                response = await hooks.post(name, body, genuine_headers(name, body, delivery, START))
                seeded.append((f"webhook:{name}:{delivery}", response.status_code))
        for request in requests:
            response = await hooks.post(request.name, request.body, request.headers)
            got[(request.name, request.mutation, response.status_code)] += 1
        events = await hooks.events()
    expected = Counter((r.name, r.mutation, r.expected) for r in requests)
    assert seeded == [(key, 202) for key, _ in seeded]
    assert got == expected
    assert [(event.dedupe_key, "tampered" in event.payload["content"]) for event in events] == [
        (key, False) for key, _ in seeded
    ]
