"""A local stand-in of Slack for tests of the Slack channel: the Web API and Socket Mode, over real
HTTP and a real WebSocket.

Web API (``POST <base>/<method>``, JSON or form body, ``Authorization: Bearer <token>``), answering
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` with Slack's documented error codes:

- ``auth.test`` with the bot token (``invalid_auth``, ``not_authed``, ``token_revoked``).
- ``apps.connections.open`` with the app-level token (``xapp-``; the bot token is
  ``not_allowed_token_type``): a one-time ``wss://``-style URL for Socket Mode.
- ``chat.postMessage`` (``channel``, ``text``, ``thread_ts``, ``blocks``): ``channel_not_found``,
  ``not_in_channel``, ``no_text``, ``msg_too_long`` past 40,000 characters; ``chat.update``.
- ``files.getUploadURLExternal`` (form: ``filename``, ``length``), the upload URL it returns, and
  ``files.completeUploadExternal`` (``files``, ``channel_id``, ``thread_ts``, ``initial_comment``);
  downloads of ``url_private_download`` that need the bot token (without it: the sign-in page).
- Rate limits: :meth:`FakeSlack.limit` makes the next calls of one method answer ``429`` with
  ``Retry-After`` and ``{"ok": false, "error": "ratelimited"}``.

Events API: :meth:`FakeSlack.signed` signs a payload as Slack does (``X-Slack-Signature: v0=...``
over ``v0:{X-Slack-Request-Timestamp}:{body}`` with the signing secret) and :meth:`FakeSlack.deliver`
posts it to the channel's Request URL, retries carrying ``X-Slack-Retry-Num``.

Socket Mode (``/socket/<ticket>``): ``hello`` on connect, then one ``events_api`` envelope per
injected event; an envelope stays unacknowledged until the client sends ``{"envelope_id": ...}``
and is sent again on the next connection. :meth:`FakeSlack.refresh` (or ``drop_after``, in the
middle of a burst) sends
``{"type": "disconnect", "reason": "refresh_requested"}`` and closes the socket.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from shared.hosting.listener import listen, serve_asgi

BOT_TOKEN = "xoxb-1111-2222-fakeBotTokenForTests"
APP_TOKEN = "xapp-1-A111-3333-fakeAppTokenForTests"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_USER = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM = "T0000001"
MAX_TEXT = 40_000


@dataclass
class Posted:
    method: str
    params: dict[str, Any]
    ts: str


@dataclass
class _Envelope:
    envelope_id: str
    payload: dict[str, Any]
    kind: str = "events_api"


@dataclass
class FakeSlack:
    """One workspace with one app. Tests inject events and inspect :attr:`posted`."""

    bot_token: str = BOT_TOKEN
    app_token: str = APP_TOKEN
    channels: set[str] = field(default_factory=lambda: {"C0000001", "D0000001"})
    """Channels the bot is in; ``outside`` lists channels that exist without it."""
    outside: set[str] = field(default_factory=lambda: {"C0000009"})
    revoked: bool = False
    drop_after: int | None = None
    """Send the ``refresh_requested`` disconnect right after this many envelopes, before their acks."""
    posted: list[Posted] = field(default_factory=list)
    connections: int = 0
    acked: list[str] = field(default_factory=list)
    base_url: str = ""
    _unacked: dict[str, _Envelope] = field(default_factory=dict)
    _limits: dict[str, list[int]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _tickets: set[str] = field(default_factory=set)
    _socket: WebSocket | None = None
    files: dict[str, tuple[str, bytes, str]] = field(default_factory=dict)
    """Files by id: (name, content, MIME type); shared ones too, once their upload completes."""
    uploads: dict[str, bytes] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)
    _uploading: dict[str, tuple[str, int]] = field(default_factory=dict)

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Serve on a free loopback port; yields the Web API base URL (``api_base_url``)."""
        app = Starlette(
            routes=[
                Route("/api/{method}", self._method, methods=["POST", "GET"]),
                Route("/files-pri/{file_id}/{name}", self._download, methods=["GET"]),
                Route("/upload/{file_id}", self._upload, methods=["POST"]),
                WebSocketRoute("/socket/{ticket}", self._socket_mode),
            ]
        )
        async with serve_asgi(app, listen("127.0.0.1", 0)) as (host, port):
            self.base_url = f"http://{host}:{port}/api"
            try:
                yield self.base_url
            finally:
                self._wake()

    # What tests do

    def inject(self, event: dict[str, Any], *, kind: str = "events_api") -> str:
        """Queue one event (the inner ``event`` object) for Socket Mode; returns its ``event_id``."""
        number = next(self._ids)
        event_id = f"Ev{number:08d}"
        payload: dict[str, Any] = (
            {
                "token": "verification",
                "team_id": TEAM,
                "api_app_id": "A111",
                "type": "event_callback",
                "event_id": event_id,
                "event_time": 1_700_000_000 + number,
                "event": event,
            }
            if kind == "events_api"
            else event
        )
        self._unacked[f"env-{number}"] = _Envelope(f"env-{number}", payload, kind)
        self._wake()
        return event_id

    def press(self, user: str, posted: Posted, action_id: str, *, name: str = "") -> dict[str, Any]:
        """A ``block_actions`` payload: ``user`` pressed the button ``action_id`` of message ``posted``."""
        button = next(
            element
            for block in posted.params.get("blocks", [])
            if block.get("type") == "actions"
            for element in block["elements"]
            if element["action_id"] == action_id
        )
        number = next(self._ids)
        return {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": name or user.lower(),
                "name": name or user.lower(),
                "team_id": TEAM,
            },
            "api_app_id": "A111",
            "trigger_id": f"{number}.{TEAM}.trigger",
            "channel": {"id": posted.params["channel"]},
            "container": {"type": "message", "message_ts": posted.ts, "channel_id": posted.params["channel"]},
            "message": {"ts": posted.ts, "text": posted.params.get("text", "")},
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "value": button["value"],
                    "action_ts": f"1700002000.{number:06d}",
                }
            ],
        }

    def add_file(self, name: str, content: bytes, mime: str) -> dict[str, Any]:
        """A file a person shared: the ``files[]`` entry of its message event."""
        file_id = f"F{next(self._ids):08d}"
        self.files[file_id] = (name, content, mime)
        return {
            "id": file_id,
            "name": name,
            "mimetype": mime,
            "size": len(content),
            "url_private": f"{self.base_url.removesuffix('/api')}/files-pri/{TEAM}-{file_id}/{name}",
            "url_private_download": f"{self.base_url.removesuffix('/api')}/files-pri/{TEAM}-{file_id}/{name}",
        }

    def limit(self, method: str, *retry_after_s: int) -> None:
        """The next ``len(retry_after_s)`` calls of ``method`` answer 429 with these ``Retry-After``."""
        self._limits.setdefault(method, []).extend(retry_after_s)

    async def refresh(self) -> None:
        """Slack's ``refresh_requested`` disconnect: a warning frame, then the socket closes."""
        socket = self._socket
        if socket is not None:
            self._socket = None
            self._wake()
            await socket.send_json({"type": "disconnect", "reason": "refresh_requested"})
            await socket.close()

    async def all_acked(self) -> None:
        while self._unacked:
            await self._changed.wait()

    async def posted_count(self, count: int) -> list[Posted]:
        while len(self.posted) < count:
            await self._changed.wait()
        return self.posted

    async def changed(self) -> None:
        """Wait for the next call, envelope, acknowledgement or connection."""
        await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # The Events API

    def event_callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` wrapped as Slack posts it to the Request URL, with a new ``event_id``."""
        number = next(self._ids)
        return {
            "token": "verification",
            "team_id": TEAM,
            "api_app_id": "A111",
            "type": "event_callback",
            "event_id": f"Ev{number:08d}",
            "event_time": 1_700_000_000 + number,
            "event": event,
        }

    @staticmethod
    def signed(
        payload: Any, *, now: float | None = None, secret: str = SIGNING_SECRET
    ) -> tuple[bytes, dict[str, str]]:
        """The body and headers Slack sends for ``payload`` (JSON-encoded)."""
        return FakeSlack.signed_bytes(json.dumps(payload).encode(), now=now, secret=secret)

    @staticmethod
    def signed_bytes(
        body: bytes, *, now: float | None = None, secret: str = SIGNING_SECRET
    ) -> tuple[bytes, dict[str, str]]:
        """``body`` with Slack's headers: ``X-Slack-Signature`` over ``v0:{timestamp}:{body}``."""
        stamp = str(int(time.time() if now is None else now))
        digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
        headers = {
            "content-type": "application/json",
            "x-slack-request-timestamp": stamp,
            "x-slack-signature": f"v0={digest}",
        }
        return body, headers

    async def deliver(self, url: str, payload: dict[str, Any], *, times: int = 1) -> list[int]:
        """POST ``payload`` ``times`` times like Slack: the first attempt, then retries that carry
        ``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason``, each signed afresh; the statuses."""
        statuses = []
        async with httpx2.AsyncClient(timeout=10) as http:
            for attempt in range(times):
                body, headers = self.signed(payload)
                if attempt:
                    headers |= {"x-slack-retry-num": str(attempt), "x-slack-retry-reason": "http_timeout"}
                statuses.append((await http.post(url, content=body, headers=headers)).status_code)
        return statuses

    # The Web API

    async def _method(self, request: Request) -> Response:
        method = request.path_params["method"]
        raw = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            params: dict[str, Any] = json.loads(raw or b"{}")
        else:
            params = dict(parse_qsl(raw.decode()))
        waits = self._limits.get(method)
        if waits:
            seconds = waits.pop(0)
            return JSONResponse(
                {"ok": False, "error": "ratelimited"}, status_code=429, headers={"Retry-After": str(seconds)}
            )
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not token:
            return _error("not_authed")
        if method == "apps.connections.open":
            if token.startswith("xoxb-"):
                return _error("not_allowed_token_type")
            if token != self.app_token:
                return _error("invalid_auth")
            ticket = f"ticket-{len(self._tickets) + self.connections + 1}"
            self._tickets.add(ticket)
            websocket_base = self.base_url.replace("http://", "ws://").removesuffix("/api")
            return _ok(url=f"{websocket_base}/socket/{ticket}")
        if token != self.bot_token:
            return _error("invalid_auth")
        if self.revoked:
            return _error("token_revoked")
        if method == "auth.test":
            return _ok(user_id=BOT_USER, bot_id=BOT_ID, team_id=TEAM, user="nexo", team="Test")
        if method in ("chat.postMessage", "chat.update"):
            return self._post(method, params)
        if method == "files.getUploadURLExternal":
            return self._upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete(params)
        return _error("unknown_method")

    def _post(self, method: str, params: dict[str, Any]) -> Response:
        channel = str(params.get("channel", ""))
        if channel in self.outside:
            return _error("not_in_channel")
        if channel not in self.channels:
            return _error("channel_not_found")
        text = params.get("text")
        if not text and not params.get("blocks"):
            return _error("no_text")
        if text and len(str(text)) > MAX_TEXT:
            return _error("msg_too_long")
        ts = str(params["ts"]) if method == "chat.update" else f"1700001000.{next(self._ids):06d}"
        self.posted.append(Posted(method, params, ts))
        self._wake()
        return _ok(channel=channel, ts=ts, message={"text": text, "ts": ts})

    # Files

    async def _download(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.bot_token}":
            # Slack answers a download without the token with its sign-in page, not the file.
            return Response("<html>sign in</html>", media_type="text/html")
        file_id = request.path_params["file_id"].removeprefix(f"{TEAM}-")
        if file_id not in self.files:
            return Response(status_code=404)
        _, content, mime = self.files[file_id]
        self.downloads.append(file_id)
        return Response(content, media_type=mime)

    def _upload_url(self, params: dict[str, Any]) -> Response:
        name, length = str(params.get("filename", "")), str(params.get("length", ""))
        if not name or not length.isdigit():
            return _error("invalid_arguments")
        file_id = f"F{next(self._ids):08d}"
        self._uploading[file_id] = (name, int(length))
        return _ok(upload_url=f"{self.base_url.removesuffix('/api')}/upload/{file_id}", file_id=file_id)

    async def _upload(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        if file_id not in self._uploading:
            return Response(status_code=404)
        self.uploads[file_id] = await request.body()
        return Response("OK - " + str(len(self.uploads[file_id])), media_type="text/plain")

    def _complete(self, params: dict[str, Any]) -> Response:
        try:
            files = json.loads(str(params.get("files", "")))
        except ValueError:
            return _error("invalid_arguments")
        channel = str(params.get("channel_id", ""))
        if channel in self.outside:
            return _error("not_in_channel")
        if channel not in self.channels:
            return _error("channel_not_found")
        for item in files:
            name, length = self._uploading.get(item.get("id"), ("", -1))
            if len(self.uploads.get(item.get("id"), b"")) != length:
                return _error("file_upload_size_mismatch" if length >= 0 else "file_not_found")
            self.files[item["id"]] = (name, self.uploads[item["id"]], "application/octet-stream")
        self.posted.append(
            Posted("files.completeUploadExternal", params, f"1700001000.{next(self._ids):06d}")
        )
        self._wake()
        return _ok(files=[{"id": item["id"]} for item in files])

    # Socket Mode

    async def _socket_mode(self, socket: WebSocket) -> None:
        ticket = socket.path_params["ticket"]
        if ticket not in self._tickets:
            await socket.close(code=4001)
            return
        self._tickets.discard(ticket)
        await socket.accept()
        self.connections += 1
        self._socket = socket
        self._wake()
        await socket.send_json({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A111"}})
        sent: set[str] = set()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_acks, socket, tg.cancel_scope)
                while self._socket is socket:
                    waiting = self._changed
                    for envelope in list(self._unacked.values()):
                        if envelope.envelope_id in sent:
                            continue
                        if self.drop_after is not None and len(sent) >= self.drop_after:
                            self.drop_after = None
                            await self.refresh()
                            break
                        sent.add(envelope.envelope_id)
                        await socket.send_json(
                            {
                                "envelope_id": envelope.envelope_id,
                                "type": envelope.kind,
                                "payload": envelope.payload,
                                "accepts_response_payload": False,
                                "retry_attempt": 0,
                                "retry_reason": "",
                            }
                        )
                    await waiting.wait()
                tg.cancel_scope.cancel()
        except WebSocketDisconnect:
            pass

    async def _read_acks(self, socket: WebSocket, scope: anyio.CancelScope) -> None:
        try:
            while True:
                frame = await socket.receive_json()
                envelope_id = str(frame.get("envelope_id", ""))
                if self._unacked.pop(envelope_id, None) is not None:
                    self.acked.append(envelope_id)
                    self._wake()
        except WebSocketDisconnect:
            if self._socket is socket:
                self._socket = None
            self._wake()
            scope.cancel()


def _ok(**fields: Any) -> Response:
    return JSONResponse({"ok": True, **fields})


def _error(code: str) -> Response:
    return JSONResponse({"ok": False, "error": code})
