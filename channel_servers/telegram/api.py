"""A small client of the Telegram Bot API over httpx2: one ``call`` per method, errors by kind.

Telegram puts the bot token in every URL (``/bot<token>/<method>``), so nothing this module raises
or logs carries a URL: transport errors are re-raised with the token scrubbed and without their
chained cause, and :func:`scrubbing` keeps it out of every other log line of the process.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
import httpx2

logger = logging.getLogger("nexo.telegram")

Sleep = Callable[[float], Awaitable[None]]
_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)


class ApiError(Exception):
    """Telegram answered ``ok: false``: ``code`` and ``description`` are its own."""

    def __init__(self, method: str, code: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(f"Telegram refused {method}: {code} {description}")
        self.method, self.code, self.description, self.retry_after = method, code, description, retry_after

    @property
    def permanent(self) -> bool:
        """Retrying the same request cannot help (blocked, unknown chat, bad request)."""
        return self.code in (400, 403, 404)


class NetworkError(Exception):
    """The request did not reach Telegram or its answer was lost; ``sent`` says whether it may have
    been received (a refused connection certainly was not)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Unauthorized(Exception):
    """401: the bot token is wrong or was revoked."""


def scrub(text: str, token: str) -> str:
    """``text`` without the bot token (it appears in URLs as ``bot<token>``)."""
    if not token:
        return text
    return text.replace(token, "<token>").replace(token.split(":", 1)[-1], "<token>")


_ANY_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,}")


@contextmanager
def scrubbing(token: str) -> Iterator[None]:
    """Every log record created meanwhile, in any logger, has the token (and any token-like string)
    replaced before a handler sees it."""
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        message = record.getMessage()
        cleaned = _ANY_TOKEN.sub("<token>", scrub(message, token))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return record

    logging.setLogRecordFactory(factory)
    try:
        yield
    finally:
        logging.setLogRecordFactory(previous)


class BotApi:
    """``await api.call("sendMessage", chat_id=..., text=...)`` returns Telegram's ``result``."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        base_url: str,
        token: str,
        *,
        max_retries: int = 4,
        max_retry_wait_s: float = 30.0,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self.http = http
        self._base = base_url.rstrip("/")
        self._token = token
        self._max_retries = max_retries
        self._max_wait = max_retry_wait_s
        self.sleep = sleep

    def file_url(self, file_path: str) -> str:
        return f"{self._base}/file/bot{self._token}/{file_path}"

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """One request; 401 raises :class:`Unauthorized`, other refusals :class:`ApiError`."""
        url = f"{self._base}/bot{self._token}/{method}"
        try:
            if files:
                form = {key: _form_value(value) for key, value in (params or {}).items()}
                response = await self.http.post(url, data=form, files=files, timeout=timeout)
            else:
                response = await self.http.post(url, json=dict(params or {}), timeout=timeout)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            raise NetworkError(f"cannot reach {self._base}: {self._clean(exc)}", sent=False) from None
        except httpx2.HTTPError as exc:
            raise NetworkError(f"{method} to {self._base} failed: {self._clean(exc)}", sent=True) from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code == 401:
            raise Unauthorized(f"Telegram refused the bot token ({body.get('description', 'Unauthorized')})")
        if not isinstance(body, dict) or not body.get("ok"):
            description = (
                str(body.get("description", response.reason_phrase)) if isinstance(body, dict) else ""
            )
            retry_after = (
                (body.get("parameters") or {}).get("retry_after") if isinstance(body, dict) else None
            )
            code = int(body.get("error_code", response.status_code)) if isinstance(body, dict) else 0
            raise ApiError(method, code or response.status_code, description, retry_after)
        return body["result"]

    async def call_retrying(self, method: str, params: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """``call``, retried after a 429 (waiting ``retry_after``), a 5xx or a refused connection,
        at most ``max_retries`` times; then the last error is raised."""
        attempt = 0
        while True:
            try:
                return await self.call(method, params, **kwargs)
            except ApiError as exc:
                wait = self._wait_for(exc, attempt)
                if wait is None:
                    raise
            except NetworkError as exc:
                if exc.sent or attempt >= self._max_retries:
                    raise
                wait = _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
            attempt += 1
            logger.info("telegram %s: retrying in %.1f s (attempt %d)", method, wait, attempt + 1)
            await self.sleep(wait)

    def _wait_for(self, error: ApiError, attempt: int) -> float | None:
        if attempt >= self._max_retries:
            return None
        if error.code == 429:
            wait = float(error.retry_after or 1)
            return wait if wait <= self._max_wait else None
        if error.code >= 500:
            return _BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)]
        return None

    def _clean(self, exc: BaseException) -> str:
        return scrub(f"{type(exc).__name__}: {exc}", self._token)


def _form_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
