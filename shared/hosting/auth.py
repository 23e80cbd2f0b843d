"""The bearer-token check in front of a server's HTTP app."""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` on every path except ``open_path`` (the health check)."""

    def __init__(self, app: ASGIApp, token: str, realm: str, open_path: str) -> None:
        self.app = app
        self.token = token.encode()
        self.realm = realm
        self.open_path = open_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == self.open_path:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, presented = header.partition(b" ")
        if scheme.lower() != b"bearer" or not presented:
            await self._refuse(scope, receive, send, "missing bearer token", None)
            return
        if not hmac.compare_digest(presented.strip(), self.token):
            await self._refuse(scope, receive, send, "invalid bearer token", "invalid_token")
            return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, why: str, error: str | None) -> None:
        challenge = f'Bearer realm="{self.realm}"' + (f', error="{error}"' if error else "")
        response = JSONResponse(
            {"error": error or "unauthorized", "error_description": why},
            status_code=401,
            headers={"WWW-Authenticate": challenge},
        )
        await response(scope, receive, send)
