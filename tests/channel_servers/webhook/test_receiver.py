"""The webhook listener: over ASGI with a recording sink (routing, limits, what reaches the sink),
and once over a real socket inside the server."""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from starlette.types import ASGIApp, Message

from channel_servers.webhook.receiver import (
    Delivery,
    ListenerError,
    Outcome,
    Receiver,
    base_url,
    parse_document,
    serve,
)
from channel_servers.webhook.server import build_server
from channel_servers.webhook.settings import WebhookSettings
from channel_servers.webhook.sources import Locator, Source, load_sources
from shared.protocol.events import PullParams, PullRequest, PullResult
from tests.channel_servers.webhook.conftest import (
    ENV,
    NAMES,
    SOURCES,
    START,
    ManualClock,
    body_for,
    path_of,
    sign,
)

pytestmark = pytest.mark.anyio


@dataclass
class RecordingSink:
    outcome: Outcome = "stored"
    deliveries: list[Delivery] = field(default_factory=list)

    async def __call__(self, delivery: Delivery) -> Outcome:
        self.deliveries.append(delivery)
        return self.outcome

    def seen(self) -> list[tuple[str, str, str | None]]:
        return [(d.source.name, d.delivery_id, d.event_kind) for d in self.deliveries]


def sources(**overrides: Mapping[str, Any]) -> tuple[Source, ...]:
    entries = [{**entry, **overrides.get(entry["name"], {})} for entry in SOURCES]
    return load_sources(entries, None, ENV)


@asynccontextmanager
async def receiving(
    sink: Any, clock: ManualClock, configured: tuple[Source, ...] | None = None
) -> AsyncIterator[httpx2.AsyncClient]:
    app = Receiver(configured or sources(), sink, clock=clock).app()
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://hooks.test"
    ) as http:
        yield http


async def post(
    http: httpx2.AsyncClient, name: str, delivery: str, ts: float = START, **kw: Any
) -> httpx2.Response:
    body = kw.pop("body", None) or body_for(name, delivery)
    headers = {**sign(name, body, delivery, ts), **kw.pop("headers", {})}
    return await http.post(path_of(name), content=body, headers=headers)


def summary(response: httpx2.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


async def test_a_signed_delivery_of_every_scheme_reaches_the_sink_with_its_id_and_kind(
    clock: ManualClock,
) -> None:
    sink = RecordingSink()
    async with receiving(sink, clock) as http:
        responses = [summary(await post(http, name, f"id-{name}")) for name in NAMES]
    assert responses == [(202, {"duplicate": False, "delivery_id": f"id-{name}"}) for name in NAMES]
    assert sink.seen() == [
        ("github", "id-github", "issues"),
        ("stripe", "id-stripe", "invoice.paid"),
        ("slack", "id-slack", "app_mention"),
        ("standard", "id-standard", "user.created"),
        ("ci", "id-ci", "build.failed"),
        ("legacy", "id-legacy", None),
        ("alerts", "id-alerts", "disk"),
    ]
    first = sink.deliveries[0]
    assert (first.body, first.document, first.digest) == (
        body_for("github", "id-github"),
        json.loads(body_for("github", "id-github")),
        hashlib.sha256(body_for("github", "id-github")).hexdigest(),
    )


async def test_the_sinks_answer_decides_the_status(clock: ManualClock) -> None:
    answers: dict[Outcome, tuple[int, Any, str | None]] = {}
    for outcome in ("duplicate", "conflict", "full"):
        async with receiving(RecordingSink(outcome=outcome), clock) as http:
            response = await post(http, "github", "d-1")
        answers[outcome] = (response.status_code, response.json(), response.headers.get("retry-after"))
    assert answers == {
        "duplicate": (200, {"duplicate": True, "delivery_id": "d-1"}, None),
        "conflict": (409, {"error": "delivery id already received with a different body"}, None),
        "full": (503, {"error": "the agent's inbox is full; retry later"}, "60"),
    }


async def test_unknown_paths_are_404_and_other_methods_405_with_allow(clock: ManualClock) -> None:
    sink = RecordingSink()
    async with receiving(sink, clock) as http:
        unknown = await http.post("/hooks/nope", content=b"{}")
        slash = await http.post("/hooks/github/", content=b"{}")
        get = await http.get("/hooks/github")
    assert summary(unknown) == (404, {"error": "Not Found"})
    assert summary(slash) == (404, {"error": "Not Found"})
    assert (get.status_code, get.json(), get.headers["allow"]) == (
        405,
        {"error": "Method Not Allowed"},
        "POST",
    )
    assert sink.deliveries == []


async def test_a_body_over_the_cap_is_413_by_content_length_or_while_streaming(clock: ManualClock) -> None:
    sink = RecordingSink()
    capped = sources(github={"max_body_bytes": 64})

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * 20

    async with receiving(sink, clock, capped) as http:
        declared = await http.post("/hooks/github", content=b"x" * 65)
        streamed = await http.post("/hooks/github", content=chunks())
        at_cap = await post(http, "github", "fits", body=b'{"pad": "' + b"x" * 51 + b'"}')
    assert summary(declared) == (413, {"error": "body larger than 64 bytes"})
    assert summary(streamed) == (413, {"error": "body larger than 64 bytes"})
    assert at_cap.status_code == 202
    assert sink.seen() == [("github", "fits", "issues")]


async def test_deliveries_beyond_a_sources_concurrency_get_503_until_one_finishes(clock: ManualClock) -> None:
    release, all_in = anyio.Event(), anyio.Event()
    held: list[str] = []

    async def holding_sink(delivery: Delivery) -> Outcome:
        if delivery.source.name == "github":
            held.append(delivery.delivery_id)
            if len(held) == 2:
                all_in.set()
            await release.wait()
        return "stored"

    statuses: dict[str, int] = {}
    async with receiving(holding_sink, clock, sources(github={"max_concurrency": 2})) as http:

        async def send(delivery: str) -> None:
            statuses[delivery] = (await post(http, "github", delivery)).status_code

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(send, "held-1")
                tg.start_soon(send, "held-2")
                await all_in.wait()
                over = await post(http, "github", "over")
                other_source = await post(http, "alerts", "a-1")
                release.set()
            after = await post(http, "github", "after")
    assert (over.status_code, over.json(), over.headers["retry-after"]) == (
        503,
        {"error": "too many deliveries in progress"},
        "1",
    )
    assert (other_source.status_code, after.status_code, statuses) == (
        202,
        202,
        {"held-1": 202, "held-2": 202},
    )


async def test_a_source_over_its_rate_gets_429_with_retry_after_until_its_bucket_refills(
    clock: ManualClock,
) -> None:
    sink = RecordingSink()
    async with receiving(sink, clock, sources(alerts={"rate_per_minute": 30})) as http:
        burst = [(await post(http, "alerts", f"a-{i}")).status_code for i in range(30)]
        limited = await post(http, "alerts", "a-30")
        clock.advance(1)
        half = await post(http, "alerts", "a-31")
        clock.advance(1)
        unsigned = await post(http, "alerts", "forged", headers={"Authorization": "Bearer guess"})
        refilled = await post(http, "alerts", "a-32")
        other = await post(http, "ci", "c-1")
    assert burst == [202] * 30
    assert (limited.status_code, limited.json(), limited.headers["retry-after"]) == (
        429,
        {"error": "rate limit exceeded"},
        "2",
    )
    assert (half.status_code, half.headers["retry-after"]) == (429, "1")
    # Refused requests spend no tokens: a forger cannot use up a real sender's budget.
    assert (unsigned.status_code, refilled.status_code, other.status_code) == (401, 202, 202)
    assert len(sink.deliveries) == 32


@pytest.mark.parametrize("offset", [-301, 301])
async def test_a_correctly_signed_but_stale_or_future_timestamp_is_400(
    clock: ManualClock, offset: int
) -> None:
    sink = RecordingSink()
    async with receiving(sink, clock) as http:
        responses = [summary(await post(http, name, f"late-{name}", START + offset)) for name in NAMES[1:4]]
    assert responses == [(400, {"error": "timestamp outside the replay window"})] * 3
    assert sink.deliveries == []


async def test_a_missing_or_oversized_delivery_id_is_400(clock: ManualClock) -> None:
    sink = RecordingSink()
    no_id = json.dumps({"type": "invoice.paid"}).encode()
    async with receiving(sink, clock) as http:
        missing = await post(http, "stripe", "", body=no_id)
        blank = await post(http, "alerts", "  ")
        huge = await post(http, "alerts", "x" * 257)
    assert summary(missing) == (400, {"error": "missing delivery id (looked in $.id)"})
    assert summary(blank) == (400, {"error": "missing delivery id (looked in X-Delivery)"})
    assert summary(huge) == (400, {"error": "delivery id longer than 256 characters"})
    assert sink.deliveries == []


async def test_slack_without_an_event_id_is_identified_by_its_signed_timestamp(clock: ManualClock) -> None:
    sink = RecordingSink()
    form = b"command=%2Fdeploy&text=prod&payload=%7B%22a%22%3A+1%7D"
    async with receiving(sink, clock) as http:
        first = await post(
            http, "slack", "", body=form, headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        second = await post(http, "slack", "", START + 1, body=form)
    assert (first.status_code, second.status_code) == (202, 202)
    ids = [d.delivery_id for d in sink.deliveries]
    assert [len(i) for i in set(ids)] == [40, 40]
    assert sink.deliveries[0].document == {"command": "/deploy", "text": "prod", "payload": {"a": 1}}
    assert sink.deliveries[1].document is None


async def test_slacks_url_verification_is_answered_with_the_challenge_and_not_stored(
    clock: ManualClock,
) -> None:
    sink = RecordingSink()
    body = json.dumps(
        {"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    )
    async with receiving(sink, clock) as http:
        response = await post(http, "slack", "", body=body.encode())
        forged = await http.post(path_of("slack"), content=body, headers={"X-Slack-Request-Timestamp": "1"})
    assert summary(response) == (200, {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
    assert summary(forged) == (401, {"error": "missing header X-Slack-Signature"})
    assert sink.deliveries == []


async def test_an_event_kind_is_cut_at_128_characters(clock: ManualClock) -> None:
    sink = RecordingSink()
    async with receiving(sink, clock) as http:
        body = json.dumps({"event": "k" * 300}).encode()
        await post(http, "ci", "long-kind", body=body)
    assert sink.seen() == [("ci", "long-kind", "k" * 128)]


async def call_raw(
    app: ASGIApp, headers: list[tuple[bytes, bytes]], messages: list[Message]
) -> tuple[int, bytes]:
    """Drive the ASGI app by hand, for what an HTTP client will not send."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/hooks/github",
        "raw_path": b"/hooks/github",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("hooks.test", 80),
    }
    incoming = iter(messages)
    sent: list[Message] = []

    async def receive() -> Message:
        return next(incoming)

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


async def test_a_malformed_content_length_is_400_and_a_vanished_client_is_not_delivered(
    clock: ManualClock,
) -> None:
    sink = RecordingSink()
    app = Receiver(sources(), sink, clock=clock).app()
    malformed = await call_raw(app, [(b"content-length", b"12x")], [])
    vanished = await call_raw(app, [], [{"type": "http.disconnect"}])
    assert malformed == (400, b'{"error":"malformed header Content-Length"}')
    assert vanished == (400, b"")
    assert sink.deliveries == []


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b'{"a": [1, 2]}', "application/json; charset=utf-8", {"a": [1, 2]}),
        (b"[1]", "text/plain", [1]),
        (b"a=1&b=&c=%7Bnot+json", "application/x-www-form-urlencoded", {"a": "1", "b": "", "c": "{not json"}),
        (b"a=1&&b", "application/x-www-form-urlencoded", None),
        (b"\xff=1", "application/x-www-form-urlencoded", None),
        (b"plain words", "text/plain", None),
        (b"\xff\xfe", "", None),
    ],
)
def test_parse_document_reads_json_and_forms_and_nothing_else(
    body: bytes, content_type: str, expected: Any
) -> None:
    assert parse_document(body, content_type) == expected


def test_base_url_brackets_ipv6_hosts() -> None:
    assert (base_url(("127.0.0.1", 8787)), base_url(("::1", 8787, 0, 0))) == (
        "http://127.0.0.1:8787",
        "http://[::1]:8787",
    )


async def test_serve_refuses_a_port_in_use_and_says_which_setting_to_change() -> None:
    app = Receiver(sources(), RecordingSink()).app()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenerError, match=f"127.0.0.1:{port}.*NEXO_WEBHOOK_PORT"):
            async with serve(app, "127.0.0.1", port):
                pass


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("$.data.0.id", "evt_9"),
        ("$.data.1.id", None),
        ("$.data.x", None),
        ("$.count", "3"),
        ("$.live", None),
        ("$.data", None),
        ("$.blank", None),
        ("X-Request-Id", "r-1"),
        ("X-Missing", None),
    ],
)
def test_a_locator_reads_a_header_or_a_scalar_at_a_json_path(spec: str, expected: str | None) -> None:
    document = {"data": [{"id": "evt_9"}], "count": 3, "live": True, "blank": "  "}
    assert Locator(spec).find({"x-request-id": " r-1 "}, document) == expected


async def test_a_real_socket_listener_accepts_webhooks_and_stops_with_the_server(
    settings: WebhookSettings, clock: ManualClock
) -> None:
    body = body_for("github", "socket-1")
    with anyio.fail_after(30):
        async with Client(build_server(settings, environ=ENV, clock=clock)) as client:
            listed = await client.call_tool("list_sources", {})
            url = listed.structured_content["sources"][0]["url"] if listed.structured_content else ""
            async with httpx2.AsyncClient() as http:
                response = await http.post(url, content=body, headers=sign("github", body, "socket-1", START))
            events = await client.session.send_request(
                PullRequest(params=PullParams(wait_ms=10_000)), PullResult
            )
        async with httpx2.AsyncClient() as http:
            with pytest.raises(httpx2.ConnectError):
                await http.post(url, content=body)
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/hooks/github")
    assert (response.status_code, [e.dedupe_key for e in events.events]) == (202, ["webhook:github:socket-1"])
