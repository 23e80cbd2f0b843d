"""A small client of Slack's Web API over httpx2: one ``call`` per method, errors by kind.

Tokens travel only in the ``Authorization`` header, never in a URL, so nothing raised or logged
here carries one. A ``429`` is waited out for its ``Retry-After`` on that method alone: Slack
limits each method (its tier) separately, so ``chat.postMessage`` being limited delays no other.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx2

logger = logging.getLogger("nexo.slack")

Sleep = Callable[[float], Awaitable[None]]

PERMANENT = frozenset(
    {
        "not_in_channel",
        "channel_not_found",
        "is_archived",
        "msg_too_long",
        "no_text",
        "invalid_blocks",
        "restricted_action",
        "not_authed",
        "invalid_auth",
        "token_revoked",
        "token_expired",
        "account_inactive",
        "not_allowed_token_type",
        "missing_scope",
    }
)
"""Errors that retrying the same request cannot fix."""
REVOKED = frozenset({"not_authed", "invalid_auth", "token_revoked", "token_expired", "account_inactive"})


class ApiError(Exception):
    """Slack answered ``ok: false``; ``error`` is its code (``channel_not_found``, ...)."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"Slack refused {method}: {error}")
        self.method, self.error = method, error

    @property
    def permanent(self) -> bool:
        return self.error in PERMANENT


class RateLimited(Exception):
    """Still limited after every retry, or asked to wait longer than allowed."""

    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(f"Slack rate-limits {method}: retry after {retry_after:g} s")
        self.method, self.retry_after = method, retry_after


class NetworkError(Exception):
    """No answer from Slack; ``sent`` says whether the request may have been received."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class WebApi:
    def __init__(
        self,
        http: httpx2.AsyncClient,
        base_url: str,
        token: str,
        *,
        max_retries: int = 4,
        max_retry_wait_s: float = 60.0,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self._http, self._base, self._token = http, base_url, token
        self._max_retries, self._max_wait, self._sleep = max_retries, max_retry_wait_s, sleep
        self._blocked_until: dict[str, float] = {}

    @property
    def http(self) -> httpx2.AsyncClient:
        return self._http

    def authorization(self) -> dict[str, str]:
        """The bot token header, for file downloads from Slack's own hosts only."""
        return {"Authorization": f"Bearer {self._token}"}

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        form: bool = False,
    ) -> Any:
        """``method`` with ``params`` as JSON (or a form, for the methods that take only forms);
        retries 429 (per method) and refused connections."""
        for attempt in range(self._max_retries + 1):
            await self._wait_for(method)
            try:
                body: dict[str, Any] = {"data": dict(params or {})} if form else {"json": dict(params or {})}
                response = await self._http.post(
                    f"{self._base}/{method}",
                    **body,
                    headers={"Authorization": f"Bearer {token or self._token}"},
                    timeout=30.0,
                )
            except httpx2.ConnectError as exc:
                if attempt == self._max_retries:
                    raise NetworkError(
                        f"cannot reach Slack at {self._base}: {type(exc).__name__}", sent=False
                    ) from None
                await self._sleep(min(2.0**attempt, 30.0))
                continue
            except httpx2.TransportError as exc:
                raise NetworkError(
                    f"no answer from Slack for {method}: {type(exc).__name__}", sent=True
                ) from None
            if response.status_code == 429:
                retry_after = _retry_after(response)
                if attempt == self._max_retries or retry_after > self._max_wait:
                    raise RateLimited(method, retry_after)
                logger.info("slack: %s is rate-limited, waiting %g s", method, retry_after)
                self._blocked_until[method] = anyio.current_time() + retry_after
                continue
            if response.status_code >= 500:
                raise NetworkError(f"Slack answered HTTP {response.status_code} for {method}", sent=True)
            answer: dict[str, Any] = response.json()
            if not answer.get("ok"):
                raise ApiError(method, str(answer.get("error", "unknown_error")))
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _wait_for(self, method: str) -> None:
        """Another call of ``method`` waited on a 429: this one does not go out before it ends."""
        until = self._blocked_until.get(method)
        if until is None:
            return
        left = until - anyio.current_time()
        if left > 0:
            await self._sleep(left)
        if self._blocked_until.get(method) == until:
            del self._blocked_until[method]


def _retry_after(response: httpx2.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0
