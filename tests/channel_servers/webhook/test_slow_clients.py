"""Slow and unsigned clients cannot starve a webhook source: over a real socket, while connections
that trickle their headers or their body (or send a whole body, unsigned) are held open against
one source, a signed delivery of that source is stored at once, and every slow connection is ended
by a deadline. The counts per kind of client are printed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream

from channel_servers.webhook.receiver import Delivery, Outcome, Receiver, serve
from channel_servers.webhook.sources import Source, load_sources
from tests.channel_servers.webhook.conftest import ENV, SOURCES, START, ManualClock, body_for, sign

pytestmark = pytest.mark.anyio

DEADLINE_S = 0.5
PER_KIND = 8  # the default max_concurrency of a source: enough to fill every slot it has


def _sources() -> tuple[Source, ...]:
    github = {**SOURCES[0], "read_timeout_s": DEADLINE_S}
    return load_sources([github], None, ENV)


def _request_head(content_length: int, extra: Mapping[str, str] | None = None) -> bytes:
    lines = [
        "POST /hooks/github HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {content_length}",
        *(f"{name}: {value}" for name, value in (extra or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _answer(stream: SocketStream) -> bytes:
    """Everything the server sends until it closes the connection or finishes one response."""
    received = b""
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return received
        received += chunk
        if b"\r\n\r\n" in received and b'"}' in received:
            return received


async def _slow_client(
    port: int, kind: str, outcomes: Counter[str], opened: anyio.Event, count: list[int]
) -> None:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        if kind == "slow_headers":
            await stream.send(b"POST /hooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trick")
        elif kind == "slow_body":
            await stream.send(_request_head(1000) + b'{"zen": "trickle')
        else:  # a whole body, unsigned, from a client that then reads nothing for a while
            body = b'{"zen": "unsigned"}'
            await stream.send(_request_head(len(body)) + body)
        count[0] += 1
        if count[0] == 3 * PER_KIND:
            opened.set()
        answer = await _answer(stream)
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/1.1 ") else "closed"
    outcomes[f"{kind}: {status}"] += 1


async def test_slow_and_unsigned_connections_never_hold_a_sources_slots_and_all_end_by_deadline(
    clock: ManualClock,
) -> None:
    stored: list[str] = []

    async def sink(delivery: Delivery) -> Outcome:
        stored.append(delivery.delivery_id)
        return "stored"

    app = Receiver(_sources(), sink, clock=clock).app()
    outcomes: Counter[str] = Counter()
    opened, count = anyio.Event(), [0]
    body = body_for("github", "valid-1")
    with anyio.fail_after(15):
        async with serve(app, "127.0.0.1", 0, header_timeout_s=DEADLINE_S) as url:
            port = int(url.rsplit(":", 1)[1])
            async with anyio.create_task_group() as tg:
                for kind in ("slow_headers", "slow_body", "unsigned"):
                    for _ in range(PER_KIND):
                        tg.start_soon(_slow_client, port, kind, outcomes, opened, count)
                await opened.wait()
                async with httpx2.AsyncClient() as http:
                    valid = await http.post(
                        f"{url}/hooks/github", content=body, headers=sign("github", body, "valid-1", START)
                    )
    print(f"\nslow clients by outcome: {dict(sorted(outcomes.items()))}")
    assert (valid.status_code, stored) == (202, ["valid-1"])
    assert outcomes == {
        "slow_headers: closed": PER_KIND,
        "slow_body: 408": PER_KIND,
        "unsigned: 401": PER_KIND,
    }


async def test_a_body_that_never_finishes_is_408_naming_the_deadline(clock: ManualClock) -> None:
    async def sink(delivery: Delivery) -> Outcome:
        raise AssertionError(f"{delivery.delivery_id} reached the sink")

    app = Receiver(_sources(), sink, clock=clock).app()
    async with serve(app, "127.0.0.1", 0, header_timeout_s=30) as url:
        port = int(url.rsplit(":", 1)[1])
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(_request_head(10) + b"{")
                answer = await _answer(stream)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert answer.endswith(b'{"error":"body not received within 0.5 s"}')


def test_a_header_deadline_must_be_positive() -> None:
    from shared.http_deadline import header_deadline_protocol

    with pytest.raises(ValueError, match="must be > 0 seconds, not 0"):
        header_deadline_protocol(0)
