"""The checks every request passes before a page sees it: Host, Origin, session, security headers.

Written as plain ASGI middleware so the live feed's streaming responses pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.dashboard.auth import COOKIE, Keyring

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
OPEN_PATHS = ("/login", "/static/")
"""Served without a session: the login link itself and the shipped CSS and script."""


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class Guard:
    def __init__(self, app: ASGIApp, keyring: Keyring, *, public_origin: str | None = None) -> None:
        self.app = app
        self.keyring = keyring
        self.public_origin = public_origin

    def _allowed_hosts(self, scope: Scope) -> Iterable[str]:
        port = (scope.get("server") or ("", 0))[1]
        yield from (f"{name}:{port}" for name in LOOPBACK_NAMES)
        if self.public_origin is not None:
            yield urlsplit(self.public_origin).netloc

    def _origin_ok(self, scope: Scope, host: str) -> bool:
        origin = _header(scope, b"origin")
        if origin is None:
            # Browsers send Origin on every POST; without it only a same-origin fetch is accepted.
            return _header(scope, b"sec-fetch-site") == "same-origin"
        allowed = {f"http://{host}", f"https://{host}"}
        if self.public_origin is not None:
            allowed = {self.public_origin}
        return origin in allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        host = _header(scope, b"host") or ""
        if host not in set(self._allowed_hosts(scope)):
            await _refuse(secured, 421, f"this dashboard does not answer for the host {host!r}")
            return
        method = scope["method"]
        if method not in SAFE_METHODS and not self._origin_ok(scope, host):
            await _refuse(secured, 403, "refused: the request came from another origin")
            return
        path: str = scope["path"]
        if path.startswith(OPEN_PATHS):
            await self.app(scope, receive, secured)
            return
        cookies = SimpleCookie(_header(scope, b"cookie") or "")
        session = self.keyring.session(cookies[COOKIE].value if COOKIE in cookies else None)
        if session is None:
            if method in SAFE_METHODS and not path.startswith("/feed/"):
                await _redirect(secured, "/login")
            else:
                await _refuse(secured, 401, "not logged in: run `nexo dashboard` for a login link")
            return
        scope.setdefault("state", {})["session"] = session
        await self.app(scope, receive, secured)


async def _refuse(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
