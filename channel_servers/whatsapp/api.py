"""A direct client of the WhatsApp Cloud API (Graph API) over httpx2, pinned to one API version.

Every error the platform answers is an :class:`ApiError` with its documented ``code``; what is worth
retrying (rate limits, 5xx, a connection that never opened) is retried here with bounded backoff,
and whatever is left is raised for the caller to map to the channel kit's outcomes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2

from channel_servers.whatsapp.settings import WhatsAppSettings

logger = logging.getLogger("nexo.whatsapp")

RATE_LIMITS: Final = frozenset({130429, 131056, 80007, 4, 80004})
"""Throughput, pair and application rate limits: wait and try again."""
TOKEN_INVALID: Final = 190
OUTSIDE_WINDOW: Final = 131047
UNDELIVERABLE: Final = frozenset({131026, 131030, 131021})
"""Undeliverable, recipient not allowed (test numbers), sender equals recipient."""
INVALID_PARAMETER: Final = frozenset({100, 131008, 131009})
TEMPORARY: Final = frozenset({1, 2, 131000, 131016, 133004})
"""Unknown, service, something went wrong, service unavailable, server temporarily unavailable."""


class ApiError(Exception):
    """The platform refused the call; ``code`` is the documented error code (0: none given)."""

    def __init__(self, status: int, code: int, message: str, details: str = "") -> None:
        super().__init__(
            f"WhatsApp error {code} (HTTP {status}): {message}{f' ({details})' if details else ''}"
        )
        self.status = status
        self.code = code
        self.details = details

    @property
    def retryable(self) -> bool:
        return self.code in RATE_LIMITS or self.code in TEMPORARY or self.status >= 500 or self.status == 429


class ApiUnreachable(Exception):
    """No connection could be opened, or retries ran out: nothing (certainly) reached the platform."""


def error_of(response: httpx2.Response) -> ApiError:
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {}
    data = error.get("error_data")
    details = str(data.get("details", "")) if isinstance(data, dict) else ""
    code = error.get("code")
    message = str(error.get("message") or response.reason_phrase or "no message")
    return ApiError(response.status_code, code if isinstance(code, int) else 0, message, details)


@dataclass(frozen=True, slots=True)
class MediaInfo:
    url: str
    mime_type: str
    file_size: int


Sleep = Callable[[float], Awaitable[None]]


class CloudApi:
    def __init__(self, http: httpx2.AsyncClient, settings: WhatsAppSettings, *, sleep: Sleep = anyio.sleep):
        self._http = http
        self._settings = settings
        self._sleep = sleep
        self._messages = f"{settings.graph_url}/{settings.phone_number_id}/messages"

    def _backoff(self, attempt: int, response: httpx2.Response | None) -> float:
        retry_after = response.headers.get("retry-after", "") if response is not None else ""
        wait = float(retry_after) if retry_after.isdigit() else float(2**attempt)
        return min(wait, self._settings.max_backoff_s)

    async def _call(self, method: str, url: str, **kwargs: Any) -> httpx2.Response:
        """One call, retried while the platform says "later"; raises ApiError or ApiUnreachable."""
        attempts = self._settings.max_retries + 1
        for attempt in range(attempts):
            response: httpx2.Response | None = None
            try:
                response = await self._http.request(method, url, **kwargs)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                failure: Exception = ApiUnreachable(f"cannot reach the WhatsApp API: {exc}")
            else:
                if response.is_success:
                    return response
                failure = error_of(response)
                if not failure.retryable:
                    raise failure
            if attempt + 1 < attempts:
                wait = self._backoff(attempt, response)
                logger.info("WhatsApp API: %s; retrying in %.1f s", failure, wait)
                await self._sleep(wait)
        raise ApiUnreachable(f"the WhatsApp API kept refusing after {attempts} attempts: {failure}")

    async def post_message(self, body: dict[str, Any]) -> str:
        """Send one message; the platform's id of it (``wamid...``)."""
        response = await self._call("POST", self._messages, json={"messaging_product": "whatsapp", **body})
        return str(response.json()["messages"][0]["id"])

    async def text(self, to: str, text: str, reply_to: str | None = None) -> str:
        body: dict[str, Any] = {
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"body": text, "preview_url": False},
        }
        if reply_to and reply_to.startswith("wamid."):
            body["context"] = {"message_id": reply_to}
        return await self.post_message(body)

    async def template(self, to: str, name: str, language: str, text: str) -> str:
        parameters = [{"type": "text", "text": text}]
        return await self.post_message(
            {
                "recipient_type": "individual",
                "to": to,
                "type": "template",
                "template": {
                    "name": name,
                    "language": {"code": language},
                    "components": [{"type": "body", "parameters": parameters}],
                },
            }
        )

    async def buttons(self, to: str, text: str, buttons: list[tuple[str, str]]) -> str:
        """An interactive message with reply buttons: (id, title) each."""
        return await self.post_message(
            {
                "recipient_type": "individual",
                "to": to,
                "type": "interactive",
                "interactive": {
                    "type": "button",
                    "body": {"text": text},
                    "action": {
                        "buttons": [
                            {"type": "reply", "reply": {"id": button_id, "title": title}}
                            for button_id, title in buttons
                        ]
                    },
                },
            }
        )

    async def read_and_typing(self, message_id: str) -> None:
        """Mark an inbound message read and show "typing..." (until a reply, at most 25 s)."""
        await self._call(
            "POST",
            self._messages,
            json={
                "messaging_product": "whatsapp",
                "status": "read",
                "message_id": message_id,
                "typing_indicator": {"type": "text"},
            },
        )

    async def upload(self, path: Path, mime: str) -> str:
        url = f"{self._settings.graph_url}/{self._settings.phone_number_id}/media"
        content = await anyio.Path(path).read_bytes()
        response = await self._call(
            "POST",
            url,
            data={"messaging_product": "whatsapp", "type": mime},
            files={"file": (path.name, content, mime)},
        )
        return str(response.json()["id"])

    async def media(self, to: str, kind: str, media_id: str, caption: str | None, file_name: str) -> str:
        obj: dict[str, Any] = {"id": media_id}
        if caption and kind != "audio":
            obj["caption"] = caption
        if kind == "document":
            obj["filename"] = file_name
        return await self.post_message({"recipient_type": "individual", "to": to, "type": kind, kind: obj})

    async def media_info(self, media_id: str) -> MediaInfo:
        response = await self._call("GET", f"{self._settings.graph_url}/{media_id}")
        found = response.json()
        return MediaInfo(str(found["url"]), str(found["mime_type"]), int(found.get("file_size", 0)))

    @asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[AsyncIterator[bytes]]:
        async with self._http.stream("GET", url) as response:
            if not response.is_success:
                await response.aread()
                raise error_of(response)
            yield response.aiter_bytes()

    async def check_token(self) -> str:
        """A cheap authenticated read of the phone number: its display number, or ApiError (190...)."""
        response = await self._call("GET", f"{self._settings.graph_url}/{self._settings.phone_number_id}")
        return str(response.json().get("display_phone_number", ""))


@asynccontextmanager
async def open_api(
    settings: WhatsAppSettings,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    sleep: Sleep = anyio.sleep,
) -> AsyncIterator[CloudApi]:
    headers = {"authorization": f"Bearer {settings.access_token.get_secret_value()}"}
    async with httpx2.AsyncClient(
        headers=headers, timeout=settings.request_timeout_s, transport=transport
    ) as http:
        yield CloudApi(http, settings, sleep=sleep)
