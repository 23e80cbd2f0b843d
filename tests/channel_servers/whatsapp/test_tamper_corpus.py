"""Over 10,000 tampered webhook requests: each one refused, nothing stored; genuine ones stored once.

The corpus starts from genuine signed deliveries (stored first) and changes one thing per request:
the signature header dropped, signed with another secret, one character of it altered, a bit of the
body flipped after signing, a correctly signed body that is not JSON or not the documented payload,
the handshake with a wrong verify token, or a message id sent again (correctly signed, new text).
Requests go straight into the webhook's ASGI app (no HTTP client in between) and the real store,
so the whole corpus runs in seconds.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
from starlette.types import ASGIApp

from tests.channel_servers.tamper import alter_hex_digit, asgi_status, flip_bit
from tests.channel_servers.whatsapp.conftest import VERIFY_TOKEN, running
from tests.fakes.whatsapp_api import APP_SECRET, FakeWhatsApp, signature

pytestmark = pytest.mark.anyio

SEEDS = 40
TAMPERED = 10_000


async def call(
    app: ASGIApp, method: str, body: bytes, headers: dict[str, str], params: dict[str, str]
) -> int:
    return await asgi_status(
        app, method, "/webhook", body, headers, query_string=urlencode(params).encode(), server_port=8792
    )


@dataclass(frozen=True)
class Tampered:
    mutation: str
    method: str
    body: bytes
    headers: dict[str, str]
    params: dict[str, str]
    expected: int


def corpus(rng: random.Random, fake: FakeWhatsApp, seeds: list[tuple[str, bytes]]) -> list[Tampered]:
    def pick() -> tuple[str, bytes, dict[str, str]]:
        message_id, body = rng.choice(seeds)
        return message_id, body, {"x-hub-signature-256": signature(body)}

    def post(mutation: str, body: bytes, headers: dict[str, str], expected: int) -> Tampered:
        return Tampered(mutation, "POST", body, headers, {}, expected)

    def missing() -> Tampered:
        _, body, _ = pick()
        return post("missing signature", body, {}, 401)

    def wrong_secret() -> Tampered:
        _, body, _ = pick()
        return post("wrong secret", body, {"x-hub-signature-256": signature(body, APP_SECRET + "!")}, 401)

    def altered() -> Tampered:
        _, body, headers = pick()
        return post(
            "altered signature",
            body,
            {"x-hub-signature-256": alter_hex_digit(rng, headers["x-hub-signature-256"], "sha256=")},
            401,
        )

    def flipped() -> Tampered:
        _, body, headers = pick()
        return post("body flipped after signing", flip_bit(rng, body), headers, 401)

    def not_json() -> Tampered:
        body = rng.choice([b"", b"{", b"[1, 2", b"\xff\xfe", b'{"object": "whatsapp_business_account"'])
        return post("signed, not JSON", body, {"x-hub-signature-256": signature(body)}, 400)

    def wrong_shape() -> Tampered:
        body = rng.choice(
            [
                b'{"object": "page", "entry": []}',
                b'{"object": "whatsapp_business_account", "entry": {}}',
                b'{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", '
                b'"value": 7}]}]}',
                b"[]",
            ]
        )
        return post("signed, wrong shape", body, {"x-hub-signature-256": signature(body)}, 400)

    def replayed() -> Tampered:
        message_id, _, _ = pick()
        payload = fake.text("15551230002", f"tampered {rng.random()}", message_id=message_id)
        body, headers = fake.signed(payload)
        return post("replayed message id", body, headers, 200)

    def handshake() -> Tampered:
        token = rng.choice(
            [
                "",
                VERIFY_TOKEN[:-1],
                VERIFY_TOKEN + "x",
                VERIFY_TOKEN.upper(),
                alter_hex_digit(rng, "sha256=" + VERIFY_TOKEN, "sha256="),
            ]
        )
        params = {
            "hub.mode": "subscribe",
            "hub.verify_token": token,
            "hub.challenge": str(rng.randrange(10**9)),
        }
        return Tampered("wrong verify token", "GET", b"", {}, params, 403)

    # A replay reaches the store (and is deduped there): one in twenty, the rest die at the door.
    each = [missing, wrong_secret, altered, flipped, not_json, wrong_shape, handshake]
    mutations: list[Callable[[], Tampered]] = [
        *each,
        *each,
        flipped,
        altered,
        wrong_secret,
        flipped,
        replayed,
    ]
    return [mutations[i % len(mutations)]() for i in range(TAMPERED)]


async def test_ten_thousand_tampered_requests_are_all_refused_and_none_is_stored(tmp_path: Path) -> None:
    rng = random.Random(20261126)
    async with running(tmp_path) as wa:
        assert wa.whatsapp.app is not None
        app = wa.whatsapp.app
        seeds = []
        seeded = []
        for n in range(SEEDS):
            payload = wa.fake.text(f"1555123{n:04d}", f"genuine {n}", message_id=f"wamid.SEED{n:04d}")
            body, headers = wa.fake.signed(payload)
            seeds.append((f"wamid.SEED{n:04d}", body))
            seeded.append(await call(app, "POST", body, headers, {}))
        requests = corpus(rng, wa.fake, seeds)
        got: Counter[tuple[str, int]] = Counter()
        for request in requests:
            status = await call(app, request.method, request.body, request.headers, request.params)
            got[(request.mutation, status)] += 1
        events = await wa.pull()
    assert len(requests) >= 10_000
    assert seeded == [200] * SEEDS
    assert got == Counter((r.mutation, r.expected) for r in requests)
    assert [(e.dedupe_key, e.payload["content"]) for e in events] == [
        (f"wamid.SEED{n:04d}", f"genuine {n}") for n in range(SEEDS)
    ]
