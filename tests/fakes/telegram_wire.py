"""The Bot API's wire format as the stand-in speaks it: errors, what the bot sent, request bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

MAX_CALLBACK_DATA = 64


class ApiFailure(Exception):
    def __init__(self, code: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code, self.description, self.retry_after = code, description, retry_after

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"ok": False, "error_code": self.code, "description": self.description}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return JSONResponse(body, status_code=self.code)


@dataclass(frozen=True)
class Call:
    """One request the bot made: the method and its parameters, decoded."""

    method: str
    params: dict[str, Any]


@dataclass
class Sent:
    """A message the bot posted, as Telegram keeps it (the text after parsing, its markup)."""

    chat_id: int
    message_id: int
    text: str
    thread_id: int | None
    reply_to: int | None
    reply_markup: dict[str, Any] | None
    parse_mode: str | None
    edits: list[str] = field(default_factory=list)


async def request_params(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = await request.body()
        if body:
            try:
                params.update(json.loads(body))
            except ValueError:
                raise ApiFailure(400, "Bad Request: can't parse JSON object") from None
    elif kind.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        async with request.form() as form:
            for key, value in form.multi_items():
                params[key] = value if isinstance(value, str) else await value.read()
    for key in ("reply_markup", "reply_parameters", "allowed_updates"):
        if isinstance(params.get(key), str):
            params[key] = decode_json(params[key])
    return params


def decode_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ApiFailure(400, "Bad Request: can't parse JSON object") from None
    return value


def inline_markup(value: Any) -> dict[str, Any] | None:
    markup = decode_json(value)
    if not markup or not any(markup.get("inline_keyboard", [])):
        return None  # an empty keyboard shows no buttons
    for row in markup.get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= MAX_CALLBACK_DATA:
                raise ApiFailure(400, "Bad Request: BUTTON_DATA_INVALID")
    return dict(markup)


def caption_field(caption: str | None) -> dict[str, Any]:
    return {"caption": caption} if caption else {}
