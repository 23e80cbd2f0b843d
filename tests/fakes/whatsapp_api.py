"""A local stand-in of the WhatsApp Cloud API (Graph API v21.0), for tests of the WhatsApp channel.

It speaks the documented wire format and records everything the channel sent. Covered:

- ``GET /v21.0/<phone-number-id>``: the phone number's fields (the channel's start-up token check).
- ``POST /v21.0/<phone-number-id>/messages``: ``text`` (body up to 4096 characters, else error 100),
  ``interactive`` reply buttons (at most 3, titles up to 20 characters), ``template`` (known names
  only, error 132001 otherwise), ``image`` / ``audio`` / ``document`` / ``video`` by uploaded media id,
  and ``status: read`` with ``typing_indicator``. Answers ``{"messaging_product", "contacts",
  "messages": [{"id": "wamid..."}]}``.
- The 24-hour customer-service window: a free-form message to a contact whose last inbound message
  (sent through :meth:`FakeWhatsApp.deliver`) is older than 24 hours, or who never wrote, fails with
  131047; templates pass.
- ``POST /v21.0/<phone-number-id>/media`` (multipart upload) and ``GET /v21.0/<media-id>`` (the
  lookup: ``url``, ``mime_type``, ``sha256``, ``file_size``), then the download URL, Bearer only.
- Bearer auth: a wrong token answers 401 with ``OAuthException`` code 190.
- The documented error shape ``{"error": {"message", "type", "code", "error_subcode",
  "fbtrace_id"}}`` for scripted failures: 130429 / 131056 / 80007 rate limits, 131047 re-engagement,
  131026 undeliverable, 100 invalid parameter, 131000 and HTTP 5xx (see :meth:`FakeWhatsApp.fail_next`).
- Webhooks: signed ``whatsapp_business_account`` payloads (``X-Hub-Signature-256``: HMAC-SHA256 of
  the raw body with the app secret) for text, interactive ``button_reply``, image / audio / document
  messages with media ids and captions, reactions and unsupported types, and statuses
  (sent / delivered / read / failed with errors), each POSTed as many times as asked; and the GET
  verification handshake (``hub.mode=subscribe``, ``hub.verify_token``, ``hub.challenge``).

Not covered: business-initiated conversations pricing, message edits (WhatsApp has none), group
chats, flows and lists, the Business Management API.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.hosting.listener import listen, serve_asgi

API_VERSION: Final = "v21.0"
PHONE_NUMBER_ID: Final = "106540352242922"
DISPLAY_NUMBER: Final = "15550001111"
WABA_ID: Final = "102290129340398"
TOKEN: Final = "EAAtest-access-token"
APP_SECRET: Final = "app-secret-for-tests"
WINDOW_S: Final = 24 * 3600
TEXT_LIMIT: Final = 4096

ERRORS: Final[dict[int, tuple[int, str, str]]] = {
    # code: (HTTP status, type, message) as the Cloud API answers them
    190: (401, "OAuthException", "Error validating access token: Session has expired."),
    100: (400, "OAuthException", "(#100) Invalid parameter"),
    130429: (429, "OAuthException", "(#130429) Rate limit hit"),
    131056: (400, "OAuthException", "(#131056) (Business Account, Consumer Account) pair rate limit hit"),
    80007: (400, "OAuthException", "(#80007) Rate limit issues"),
    131047: (400, "OAuthException", "(#131047) Re-engagement message"),
    131026: (400, "OAuthException", "(#131026) Message undeliverable"),
    131000: (500, "OAuthException", "(#131000) Something went wrong"),
    132001: (400, "OAuthException", "(#132001) Template name does not exist in the translation"),
}


def error_body(code: int, details: str = "") -> tuple[int, dict[str, Any]]:
    status, kind, message = ERRORS[code]
    error: dict[str, Any] = {
        "message": message,
        "type": kind,
        "code": code,
        "error_subcode": 2494010 if code == 131047 else 0,
        "fbtrace_id": secrets.token_urlsafe(12),
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return status, {"error": error}


def signature(body: bytes, app_secret: str = APP_SECRET) -> str:
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Media:
    content: bytes
    mime_type: str


@dataclass
class FakeWhatsApp:
    """The platform: what the channel sent (``sent``), the media it holds, scripted failures."""

    token: str = TOKEN
    app_secret: str = APP_SECRET
    phone_number_id: str = PHONE_NUMBER_ID
    templates: frozenset[str] = frozenset({"nexo_notice"})
    clock: Callable[[], float] = time.time
    sent: list[dict[str, Any]] = field(default_factory=list)
    """Every accepted POST to /messages (read receipts included), in order."""
    uploads: list[tuple[str, str, bytes]] = field(default_factory=list)
    """(media id, MIME type, bytes) of each upload."""
    media: dict[str, Media] = field(default_factory=dict)
    undeliverable: set[str] = field(default_factory=set)
    last_inbound: dict[str, float] = field(default_factory=dict)
    """wa_id -> when that contact last wrote (opens the 24-hour window)."""
    lookups: int = 0
    url: str = ""
    _failures: deque[int] = field(default_factory=deque)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    changed: anyio.Event = field(default_factory=anyio.Event)

    # --- scripting -------------------------------------------------------------------------------

    def fail_next(self, *codes: int) -> None:
        """The next requests to /messages fail with these codes (a code of 500-599 is a bare HTTP status)."""
        self._failures.extend(codes)

    def add_media(self, content: bytes, mime_type: str) -> str:
        media_id = str(900000 + next(self._ids))
        self.media[media_id] = Media(content, mime_type)
        return media_id

    def messages(self, kind: str | None = None) -> list[dict[str, Any]]:
        """What was sent to contacts (read receipts left out), optionally of one type."""
        return [m for m in self.sent if "to" in m and (kind is None or m.get("type") == kind)]

    async def wait_for(self, predicate: Callable[[FakeWhatsApp], bool], timeout_s: float = 10.0) -> None:
        with anyio.fail_after(timeout_s):
            while not predicate(self):
                self.changed = anyio.Event()
                await self.changed.wait()

    def _record(self, body: dict[str, Any]) -> None:
        self.sent.append(body)
        self.changed.set()

    # --- the Graph API ---------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        presented = request.headers.get("authorization", "")
        return hmac.compare_digest(presented.encode(), f"Bearer {self.token}".encode())

    def _error(self, code: int, details: str = "") -> JSONResponse:
        status, body = error_body(code, details)
        return JSONResponse(body, status_code=status)

    async def phone_number(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(190)
        if request.path_params["node"] != self.phone_number_id:
            return self._media_lookup(request.path_params["node"])
        return JSONResponse(
            {"id": self.phone_number_id, "display_phone_number": DISPLAY_NUMBER, "verified_name": "Nexo"}
        )

    def _media_lookup(self, media_id: str) -> Response:
        found = self.media.get(media_id)
        if found is None:
            return self._error(100, f"media {media_id} does not exist")
        self.lookups += 1
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "url": f"{self.url}/download/{media_id}",
                "mime_type": found.mime_type,
                "sha256": hashlib.sha256(found.content).hexdigest(),
                "file_size": len(found.content),
                "id": media_id,
            }
        )

    async def download(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(190)
        found = self.media.get(request.path_params["media_id"])
        if found is None:
            return Response(status_code=404)
        return Response(found.content, media_type=found.mime_type)

    async def upload(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(190)
        async with request.form() as form:
            upload = form.get("file")
            mime = form.get("type")
            if form.get("messaging_product") != "whatsapp" or not isinstance(mime, str) or upload is None:
                return self._error(100, "messaging_product, type and file are required")
            if isinstance(upload, str):
                return self._error(100, "file must be an upload")
            content = await upload.read()
        media_id = self.add_media(content, mime)
        self.uploads.append((media_id, mime, content))
        return JSONResponse({"id": media_id})

    async def post_message(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(190)
        if request.path_params["node"] != self.phone_number_id:
            return self._error(100, "unknown phone number id")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return self._error(100, "the body is not JSON")
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            return self._error(100, "messaging_product must be whatsapp")
        if self._failures:
            code = self._failures.popleft()
            if 500 <= code <= 599:
                return Response("upstream trouble", status_code=code)
            return self._error(code)
        if body.get("status") == "read":
            if not str(body.get("message_id", "")).startswith("wamid."):
                return self._error(100, "message_id must be a wamid")
            self._record(body)
            return JSONResponse({"success": True})
        refusal = self._refusal(body)
        if refusal is not None:
            return refusal
        self._record(body)
        to = str(body["to"])
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": f"wamid.{secrets.token_hex(12)}"}],
            }
        )

    def _refusal(self, body: dict[str, Any]) -> JSONResponse | None:
        to, kind = body.get("to"), body.get("type", "text")
        if not isinstance(to, str) or not to.isdigit():
            return self._error(100, "to must be a phone number")
        if to in self.undeliverable:
            return self._error(131026, "the recipient cannot receive this message")
        content = body.get(kind)
        if not isinstance(content, dict):
            return self._error(100, f"{kind} object is required")
        if kind == "text":
            text = content.get("body")
            if not isinstance(text, str) or not text:
                return self._error(100, "text.body is required")
            if len(text) > TEXT_LIMIT:
                return self._error(100, f"text.body is longer than {TEXT_LIMIT} characters")
        elif kind == "interactive":
            buttons = content.get("action", {}).get("buttons", [])
            if not 1 <= len(buttons) <= 3 or any(len(b["reply"]["title"]) > 20 for b in buttons):
                return self._error(100, "1 to 3 reply buttons with titles of at most 20 characters")
        elif kind == "template":
            if content.get("name") not in self.templates:
                return self._error(132001)
            return None
        elif kind in ("image", "audio", "document", "video"):
            if content.get("id") not in self.media and "link" not in content:
                return self._error(100, "media id does not exist")
        else:
            return self._error(100, f"unsupported type {kind!r}")
        opened = self.last_inbound.get(to)
        if opened is None or self.clock() - opened > WINDOW_S:
            return self._error(
                131047,
                "Message failed to send because more than 24 hours have passed since the customer "
                "last replied to this number.",
            )
        return None

    def app(self) -> Starlette:
        prefix = f"/{API_VERSION}"
        return Starlette(
            routes=[
                Route(f"{prefix}/{{node}}", self.phone_number, methods=["GET"]),
                Route(f"{prefix}/{{node}}/messages", self.post_message, methods=["POST"]),
                Route(f"{prefix}/{{node}}/media", self.upload, methods=["POST"]),
                Route("/download/{media_id}", self.download, methods=["GET"]),
            ]
        )

    # --- webhooks --------------------------------------------------------------------------------

    def envelope(self, value: dict[str, Any]) -> dict[str, Any]:
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": DISPLAY_NUMBER, "phone_number_id": self.phone_number_id},
            **value,
        }
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
        }

    def message(
        self, wa_id: str, message: dict[str, Any], *, name: str = "Ana", message_id: str | None = None
    ) -> dict[str, Any]:
        """A ``messages`` webhook from ``wa_id``; ``message`` holds ``type`` and its object."""
        body = {
            "from": wa_id,
            "id": message_id or f"wamid.{secrets.token_hex(12)}",
            "timestamp": str(int(self.clock())),
            **message,
        }
        return self.envelope({"contacts": [{"profile": {"name": name}, "wa_id": wa_id}], "messages": [body]})

    def text(self, wa_id: str, text: str, **kwargs: Any) -> dict[str, Any]:
        return self.message(wa_id, {"type": "text", "text": {"body": text}}, **kwargs)

    def button_reply(self, wa_id: str, button_id: str, title: str, **kwargs: Any) -> dict[str, Any]:
        interactive = {"type": "button_reply", "button_reply": {"id": button_id, "title": title}}
        return self.message(wa_id, {"type": "interactive", "interactive": interactive}, **kwargs)

    def media_message(
        self, wa_id: str, kind: str, media_id: str, *, caption: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        found = self.media[media_id]
        obj: dict[str, Any] = {
            "id": media_id,
            "mime_type": found.mime_type,
            "sha256": hashlib.sha256(found.content).hexdigest(),
        }
        if caption is not None:
            obj["caption"] = caption
        if kind == "document":
            obj["filename"] = "report.pdf"
        if kind == "audio":
            obj["voice"] = True
        return self.message(wa_id, {"type": kind, kind: obj}, **kwargs)

    def status(
        self, message_id: str, status: str, recipient: str, *, error_code: int | None = None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": message_id,
            "status": status,
            "timestamp": str(int(self.clock())),
            "recipient_id": recipient,
        }
        if error_code is not None:
            _, body = error_body(error_code)
            entry["errors"] = [
                {
                    "code": error_code,
                    "title": body["error"]["message"],
                    "message": body["error"]["message"],
                    "error_data": {"details": "the platform could not deliver the message"},
                }
            ]
        return self.envelope({"statuses": [entry]})

    def signed(self, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(payload, separators=(",", ":")).encode()
        return body, {
            "content-type": "application/json",
            "x-hub-signature-256": signature(body, self.app_secret),
        }

    async def deliver(
        self, http: httpx2.AsyncClient, webhook_url: str, payload: dict[str, Any], *, times: int = 1
    ) -> list[int]:
        """POST a signed webhook ``times`` times (as the platform redelivers); the HTTP statuses."""
        for change in payload["entry"][0]["changes"]:
            for contact in change["value"].get("contacts", []):
                self.last_inbound[contact["wa_id"]] = self.clock()
        body, headers = self.signed(payload)
        return [
            (await http.post(webhook_url, content=body, headers=headers)).status_code for _ in range(times)
        ]

    @staticmethod
    async def handshake(
        http: httpx2.AsyncClient, webhook_url: str, verify_token: str, challenge: str = "1158201444"
    ) -> httpx2.Response:
        """The GET Meta sends when the webhook URL is configured."""
        params = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
        return await http.get(webhook_url, params=params)


@asynccontextmanager
async def serve(fake: FakeWhatsApp) -> AsyncIterator[FakeWhatsApp]:
    """Serve ``fake`` on a free loopback port; ``fake.url`` is its base URL (``api_base_url``)."""
    sock = listen("127.0.0.1", 0)
    async with serve_asgi(fake.app(), sock) as (host, port):
        fake.url = f"http://{host}:{port}"
        yield fake
