"""What the tamper-corpus tests share: one request straight into an ASGI app, and the mutations."""

from __future__ import annotations

import random

from starlette.types import ASGIApp, Message, Scope

HEX = "0123456789abcdef"


async def asgi_status(
    app: ASGIApp,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    query_string: bytes = b"",
    server_port: int,
) -> int:
    """One request through the ASGI interface, as uvicorn would hand it over; the response status."""
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query_string,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", server_port),
    }
    sent = False
    statuses: list[int] = []

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))

    await app(scope, receive, send)
    return statuses[0]


def flip_bit(rng: random.Random, body: bytes) -> bytes:
    index = rng.randrange(len(body))
    return body[:index] + bytes([body[index] ^ (1 << rng.randrange(8))]) + body[index + 1 :]


def alter_hex_digit(rng: random.Random, signature: str, prefix: str) -> str:
    """One hex digit after ``prefix`` changed to another digit: the prefix and case are not the secret."""
    index = rng.randrange(len(prefix), len(signature))
    return signature[:index] + rng.choice(HEX.replace(signature[index], "")) + signature[index + 1 :]
