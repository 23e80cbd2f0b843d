"""A local stand-in of the Telegram Bot API, served over real HTTP, for tests of the Telegram channel.

It answers ``/bot<token>/<method>`` (JSON, form or multipart bodies, as Telegram accepts) and
``/file/bot<token>/<path>`` with the documented shapes: ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": N, "description": "...", "parameters": {"retry_after": S}}``.

Documented behaviours it covers:

- ``getMe``; a wrong token is ``401 Unauthorized`` on every method.
- ``getUpdates`` with ``offset`` (confirms every update below it), ``limit``, ``timeout`` (long poll)
  and ``allowed_updates``; ``409 Conflict`` while a webhook is set, and for the older of two
  concurrent long polls ("terminated by other getUpdates request").
- ``setWebhook`` (``url``, ``secret_token`` sent back as ``X-Telegram-Bot-Api-Secret-Token``),
  ``deleteWebhook``, ``getWebhookInfo``; updates are POSTed to the webhook and retried until a 2xx.
- ``sendMessage``: ``parse_mode=HTML`` validated (``400 Bad Request: can't parse entities: ...``,
  see :mod:`tests.fakes.telegram_html`), 4096 characters after parsing (``400 Bad Request: message
  is too long``), ``reply_parameters``, ``message_thread_id``, ``reply_markup.inline_keyboard``
  with ``callback_data`` of 1-64 bytes (``400 Bad Request: BUTTON_DATA_INVALID``); a reply to a
  message in a forum topic is posted in that topic.
- ``editMessageText``, ``editMessageReplyMarkup``, ``answerCallbackQuery``, ``sendChatAction`` (a
  ``message_thread_id`` outside a forum is ``400 Bad Request: message thread not found``).
- ``getFile`` and the file download; ``sendDocument`` / ``sendPhoto`` as multipart uploads (captions
  of at most 1024 characters after parsing).
- A chat that blocked the bot is ``403 Forbidden: bot was blocked by the user``; an unknown chat
  ``400 Bad Request: chat not found``; injected ``429`` with ``retry_after`` and ``5xx`` answers.

Inbound updates are injected with :meth:`FakeTelegram.inject` (messages in private chats, groups
and forum topics, edited messages, button presses, photos, voice notes and documents), each
delivered ``times`` times, and everything the bot sent is recorded in :attr:`FakeTelegram.calls`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.hosting.listener import listen, serve_asgi
from tests.fakes.telegram_html import EntityError, parse_html, utf16_len
from tests.fakes.telegram_updates import UpdateBuilder
from tests.fakes.telegram_wire import (
    ApiFailure,
    Call,
    Sent,
    decode_json,
    inline_markup,
    request_params,
)

TOKEN = "123456:AAHfakeTokenForTestsOnly0123456789abc"
BOT_ID = 123456
BOT_USERNAME = "nexo_test_bot"
MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_DOWNLOAD = 20 * 1024 * 1024
WEBHOOK_ATTEMPTS = 5


@dataclass
class _Pending:
    update: dict[str, Any]
    deliveries_left: int


class FakeTelegram(UpdateBuilder):
    """The Bot API for one bot. Tests inject updates and inspect what the bot sent."""

    def __init__(self, token: str = TOKEN) -> None:
        super().__init__()
        self.token = token
        self.calls: list[Call] = []
        self.sent: list[Sent] = []
        self.blocked: set[int] = set()
        self.webhook: dict[str, Any] | None = None
        self.webhook_answers: list[int] = []
        self.confirmed_offset = 0
        self._faults: dict[str, list[ApiFailure]] = {}
        self._queue: list[_Pending] = []
        self._changed = anyio.Event()
        self._poll_generation = 0
        self._http: httpx2.AsyncClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self.base_url = ""
        self._closing = False

    # -- what tests call ------------------------------------------------------------------------

    def fail_next(
        self, method: str, code: int, description: str, *, retry_after: int | None = None, times: int = 1
    ) -> None:
        """The next ``times`` calls of ``method`` fail with this answer."""
        self._faults.setdefault(method, []).extend(
            ApiFailure(code, description, retry_after) for _ in range(times)
        )

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        return [call.params for call in self.calls if call.method == method]

    def sent_to(self, chat_id: int) -> list[Sent]:
        return [message for message in self.sent if message.chat_id == chat_id]

    def inject(self, update: dict[str, Any], *, times: int = 1) -> int:
        """Queue an update (built by the :class:`UpdateBuilder` helpers), delivered ``times`` times;
        returns its id."""
        update_id = next(self._update_ids)
        stamped = {"update_id": update_id, **update}
        self._queue.append(_Pending(stamped, times))
        if self.webhook is not None and self._tg is not None:
            self._tg.start_soon(self._push, stamped, times)
        self._wake()
        return update_id

    async def sent_count(self, count: int, *, timeout: float = 10) -> list[Sent]:
        """Wait (bounded) until the bot sent at least ``count`` messages."""
        with anyio.fail_after(timeout):
            while len(self.sent) < count:
                await self._wait()
        return list(self.sent)

    async def called(self, method: str, count: int = 1, *, timeout: float = 10) -> list[dict[str, Any]]:
        """Wait (bounded) until ``method`` was called at least ``count`` times."""
        with anyio.fail_after(timeout):
            while len(self.calls_of(method)) < count:
                await self._wait()
        return self.calls_of(method)

    async def confirmed(self, update_id: int, *, timeout: float = 10) -> None:
        """Wait (bounded) until the bot confirmed ``update_id`` (its offset moved past it)."""
        with anyio.fail_after(timeout):
            while self.confirmed_offset <= update_id:
                await self._wait()

    # -- serving --------------------------------------------------------------------------------

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Serve on a free loopback port; yields the base URL (``api_base_url`` of the channel)."""
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )
        async with (
            httpx2.AsyncClient(timeout=10) as http,
            anyio.create_task_group() as tg,
            serve_asgi(app, listen("127.0.0.1", 0)) as (host, port),
        ):
            self._http, self._tg = http, tg
            self.base_url = f"http://{host}:{port}"
            try:
                yield self.base_url
            finally:
                self._closing = True
                self._wake()  # long polls in progress answer now, so the server stops at once
                tg.cancel_scope.cancel()

    async def _wait(self) -> None:
        await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return ApiFailure(401, "Unauthorized").response()
        content = self.files.get(request.path_params["path"].removeprefix("files/"))
        if content is None:
            return Response(status_code=404)
        return Response(content, media_type="application/octet-stream")

    async def _endpoint(self, request: Request) -> Response:
        method = request.path_params["method"]
        if request.path_params["token"] != self.token:
            return ApiFailure(401, "Unauthorized").response()
        params = await request_params(request)
        self.calls.append(Call(method, params))
        self._wake()
        try:
            faults = self._faults.get(method)
            if faults:
                raise faults.pop(0)
            handler = self._methods().get(method)
            if handler is None:
                raise ApiFailure(404, "Not Found")
            result = await handler(params)
        except ApiFailure as failure:
            return failure.response()
        self._wake()
        return JSONResponse({"ok": True, "result": result})

    def _methods(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
        return {
            "getMe": self._get_me,
            "getUpdates": self._get_updates,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "answerCallbackQuery": self._answer_callback_query,
            "sendChatAction": self._send_chat_action,
            "getFile": self._get_file,
            "sendDocument": self._send_document,
            "sendPhoto": self._send_photo,
        }

    # -- methods --------------------------------------------------------------------------------

    async def _get_me(self, _: dict[str, Any]) -> dict[str, Any]:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Nexo", "username": BOT_USERNAME}

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook is not None:
            raise ApiFailure(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook "
                "to delete the webhook first",
            )
        self._poll_generation += 1
        generation = self._poll_generation
        offset = int(params.get("offset", 0))
        limit = min(int(params.get("limit", 100)), 100)
        allowed = params.get("allowed_updates")
        self._confirm(offset)
        with anyio.move_on_after(float(params.get("timeout", 0))):
            while not self._queue and not self._closing:
                await self._wait()
                if generation != self._poll_generation:
                    raise ApiFailure(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that only "
                        "one bot instance is running",
                    )
        return [
            pending.update
            for pending in self._queue
            if not allowed or any(kind in pending.update for kind in allowed)
        ][:limit]

    def _confirm(self, offset: int) -> None:
        if offset <= 0:
            return
        kept: list[_Pending] = []
        for pending in self._queue:
            below = pending.update["update_id"] < offset
            if below and pending.deliveries_left <= 1:
                continue
            if below:
                pending.deliveries_left -= 1  # a redelivery of an update already confirmed
            kept.append(pending)
        self._queue = kept
        self.confirmed_offset = max(self.confirmed_offset, offset)

    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        secret = params.get("secret_token")
        if secret is not None and not (1 <= len(secret) <= 256):
            raise ApiFailure(400, "Bad Request: secret token is invalid")
        self.webhook = {"url": params["url"], "secret_token": secret}
        self._poll_generation += 1
        for pending in list(self._queue):
            assert self._tg is not None
            self._tg.start_soon(self._push, pending.update, pending.deliveries_left)
        self._queue.clear()
        return True

    async def _delete_webhook(self, _: dict[str, Any]) -> bool:
        self.webhook = None
        return True

    async def _get_webhook_info(self, _: dict[str, Any]) -> dict[str, Any]:
        url = self.webhook["url"] if self.webhook else ""
        return {"url": url, "has_custom_certificate": False, "pending_update_count": len(self._queue)}

    async def _push(self, update: dict[str, Any], times: int) -> None:
        """POST to the webhook ``times`` times, each retried until a 2xx (as Telegram retries)."""
        assert self._http is not None
        for _ in range(times):
            for _ in range(WEBHOOK_ATTEMPTS):
                if self.webhook is None:
                    return
                headers = {}
                if self.webhook["secret_token"]:
                    headers["X-Telegram-Bot-Api-Secret-Token"] = self.webhook["secret_token"]
                try:
                    answer = await self._http.post(self.webhook["url"], json=update, headers=headers)
                except httpx2.TransportError:
                    continue
                self.webhook_answers.append(answer.status_code)
                self._wake()
                if answer.is_success:
                    break
        self._queue = [pending for pending in self._queue if pending.update is not update]

    def _target(self, params: dict[str, Any]) -> int:
        chat_id = int(params["chat_id"])
        if chat_id in self.blocked:
            raise ApiFailure(403, "Forbidden: bot was blocked by the user")
        if chat_id not in self.chats:
            raise ApiFailure(400, "Bad Request: chat not found")
        return chat_id

    def _text(self, text: str, parse_mode: str | None) -> str:
        if parse_mode == "HTML":
            try:
                text = parse_html(text)
            except EntityError as exc:
                raise ApiFailure(400, f"Bad Request: {exc}") from None
        elif parse_mode is not None:
            raise ApiFailure(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        if not text.strip():
            raise ApiFailure(400, "Bad Request: message text is empty")
        if utf16_len(text) > MAX_TEXT:
            raise ApiFailure(400, "Bad Request: message is too long")
        return text

    def _find(self, chat_id: int, message_id: int) -> Sent:
        for message in self.sent:
            if message.chat_id == chat_id and message.message_id == message_id:
                return message
        raise ApiFailure(400, "Bad Request: message to edit not found")

    async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._target(params)
        text = self._text(str(params.get("text", "")), params.get("parse_mode"))
        return self._post(chat_id, text, params)

    def _post(self, chat_id: int, text: str, params: dict[str, Any]) -> dict[str, Any]:
        markup = inline_markup(params.get("reply_markup"))
        reply = decode_json(params.get("reply_parameters"))
        thread = params.get("message_thread_id")
        if thread is None and reply:
            # A reply to a message in a forum topic is posted in that topic.
            thread = self._topics.get((chat_id, int(reply["message_id"])))
        sent = Sent(
            chat_id=chat_id,
            message_id=next(self._ids(chat_id)),
            text=text,
            thread_id=int(thread) if thread is not None else None,
            reply_to=int(reply["message_id"]) if reply else None,
            reply_markup=markup,
            parse_mode=params.get("parse_mode"),
        )
        if sent.thread_id is not None:
            self._topics[(chat_id, sent.message_id)] = sent.thread_id
        self.sent.append(sent)
        return self._message(sent)

    def _message(self, sent: Sent) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": sent.message_id,
            "date": 1_700_000_000,
            "chat": self.chats[sent.chat_id],
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Nexo", "username": BOT_USERNAME},
            "text": sent.text,
        }
        if sent.thread_id is not None:
            message["message_thread_id"] = sent.thread_id
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        return message

    async def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = self._find(self._target(params), int(params["message_id"]))
        text = self._text(str(params.get("text", "")), params.get("parse_mode"))
        if text == sent.text and inline_markup(params.get("reply_markup")) == sent.reply_markup:
            raise ApiFailure(400, "Bad Request: message is not modified")
        sent.edits.append(text)
        sent.text, sent.reply_markup = text, inline_markup(params.get("reply_markup"))
        return self._message(sent)

    async def _edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = self._find(self._target(params), int(params["message_id"]))
        sent.reply_markup = inline_markup(params.get("reply_markup"))
        return self._message(sent)

    async def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        if not params.get("callback_query_id"):
            raise ApiFailure(400, "Bad Request: query is too old and response timeout expired")
        return True

    async def _send_chat_action(self, params: dict[str, Any]) -> bool:
        chat_id = self._target(params)
        if params.get("message_thread_id") is not None and not self.chats[chat_id].get("is_forum"):
            raise ApiFailure(400, "Bad Request: message thread not found")
        return True

    async def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        content = self.files.get(file_id)
        if content is None:
            raise ApiFailure(400, "Bad Request: invalid file_id")
        if len(content) > MAX_DOWNLOAD:
            raise ApiFailure(400, "Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(content),
            "file_path": f"files/{file_id}",
        }

    async def _send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._upload(params, "document")

    async def _send_photo(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._upload(params, "photo")

    def _upload(self, params: dict[str, Any], kind: str) -> dict[str, Any]:
        chat_id = self._target(params)
        upload = params.get(kind)
        if not isinstance(upload, bytes):
            raise ApiFailure(400, f"Bad Request: there is no {kind} in the request")
        caption = str(params.get("caption") or "")
        if caption:
            caption = self._text(caption, params.get("parse_mode"))
            if utf16_len(caption) > MAX_CAPTION:
                raise ApiFailure(400, "Bad Request: message caption is too long")
        message = self._post(chat_id, caption, params)
        self.files[f"up{message['message_id']}"] = upload
        return message | {kind: {"file_id": self.add_file(upload), "file_size": len(upload)}}
