"""A scripted fake LLM: a real HTTP server speaking the OpenAI chat-completions and Anthropic Messages wires.

Each request takes the next script item. Run it by hand with
`python -m tests.fakes.llm --port 8089 --reply "hello"`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Wire = Literal["openai", "anthropic"]

logger = logging.getLogger("tests.fakes.llm")

_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0
_ERROR_PREFIX = "ERROR: "


@dataclass(frozen=True)
class Reply:
    """Answer with text and no tool calls."""

    text: str


@dataclass(frozen=True)
class CallTool:
    """Answer with one tool call; the id is generated (call_N / toolu_N) unless given."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Step:
    """The general answer: optional text and any number of tool calls."""

    text: str | None = None
    tool_calls: tuple[CallTool, ...] = ()


@dataclass(frozen=True)
class Fail:
    """Answer with an error status and a wire-shaped error body."""

    status: int
    retry_after: str | None = None
    message: str = "scripted failure"


@dataclass(frozen=True)
class Raw:
    """Answer with exactly these bytes, for malformed-response tests."""

    body: str | bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    media_type: str = "application/json"


Outcome = Reply | CallTool | Step | Fail | Raw
ScriptItem = Outcome | Callable[["RecordedRequest"], Outcome]
_OUTCOMES = (Reply, CallTool, Step, Fail, Raw)


def _text_of(content: object) -> str:
    """Text of a message content: a string, or the text of its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [message for message in messages if isinstance(message, dict)]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received, with helpers that read either wire format."""

    wire: Wire
    body: dict[str, Any]
    headers: dict[str, str]
    index: int

    @property
    def system(self) -> str | None:
        if self.wire == "anthropic":
            system = self.body.get("system")
            return _text_of(system) if system is not None else None
        for message in _messages(self.body):
            if message.get("role") == "system":
                return _text_of(message.get("content"))
        return None

    @property
    def tool_names(self) -> list[str]:
        names: list[str] = []
        for tool in self.body.get("tools") or []:
            spec = tool.get("function", {}) if self.wire == "openai" else tool
            names.append(str(spec.get("name")))
        return names

    @property
    def last_user_text(self) -> str | None:
        """Text of the last user-written message; tool-result turns do not count."""
        for message in reversed(_messages(self.body)):
            if message.get("role") == "user":
                text = _text_of(message.get("content"))
                if text or isinstance(message.get("content"), str):
                    return text
        return None

    @property
    def tool_results(self) -> list[tuple[str, str, bool]]:
        """(call_id, content, is_error) in order; an OpenAI "ERROR: " prefix becomes is_error."""
        results: list[tuple[str, str, bool]] = []
        for message in _messages(self.body):
            if self.wire == "openai":
                if message.get("role") == "tool":
                    text = _text_of(message.get("content"))
                    is_error = text.startswith(_ERROR_PREFIX)
                    if is_error:
                        text = text[len(_ERROR_PREFIX) :]
                    results.append((str(message.get("tool_call_id")), text, is_error))
                continue
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.append(
                        (
                            str(block.get("tool_use_id")),
                            _text_of(block.get("content")),
                            bool(block.get("is_error", False)),
                        )
                    )
        return results

    @property
    def input_chars(self) -> int:
        """Characters of system prompt and message text: the basis of the reported input tokens."""
        chars = len(self.system or "") if self.wire == "anthropic" else 0
        for message in _messages(self.body):
            content = message.get("content")
            chars += len(_text_of(content))
            if isinstance(content, list):
                chars += sum(
                    len(_text_of(block.get("content")))
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                )
        return chars


def tokens_for(chars: int) -> int:
    """The fake's deterministic token estimate."""
    return max(1, chars // 4)


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _error_response(wire: Wire, status: int, message: str, retry_after: str | None = None) -> JSONResponse:
    headers = {"retry-after": retry_after} if retry_after is not None else None
    if wire == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = "invalid_request_error" if status < 500 else "server_error"
        body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def _invalid_request(wire: Wire, body: object) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: field required"
    if not isinstance(body.get("messages"), list):
        return "messages: field required"
    if wire == "anthropic" and not isinstance(body.get("max_tokens"), int):
        return "max_tokens: field required"
    return None


class _Server(uvicorn.Server):
    """uvicorn without its 0.1 s polling loop, so tests start and stop it quickly."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.on_tick(0)
        self._ready.set()
        await self._stop.wait()

    def request_stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        for server in self.servers:
            await server.wait_closed()


class FakeLLM:
    """A scripted LLM server on 127.0.0.1, usable with `with` or `async with`."""

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        default: ScriptItem | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        bill_tools: bool = False,
    ) -> None:
        """``bill_tools``: count the request's tool definitions (their JSON) as input, as providers do."""
        self._bill_tools = bill_tools
        self._script: deque[ScriptItem] = deque(script)
        self._default = default
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._requests: list[RecordedRequest] = []
        self._billed: list[int] = []
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeLLM is not running: use it as a context manager")
        return self._port

    @property
    def openai_base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._changed:
            return list(self._requests)

    @property
    def billed_tokens(self) -> int:
        """Input plus output tokens of every answer sent, as their usage reports (what a provider bills)."""
        with self._changed:
            return sum(self._billed)

    def push(self, *items: ScriptItem) -> None:
        with self._changed:
            self._script.extend(items)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"fake LLM got {len(self._requests)} request(s), expected {n}")

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("FakeLLM is already running")
        # An explicit IPPROTO_TCP lets asyncio set TCP_NODELAY on accepted connections; without it
        # every keep-alive response waits out the peer's delayed ACK (~40 ms).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._requested_port))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
        )
        ready = threading.Event()
        self._server = _Server(config, ready)
        self._thread = threading.Thread(target=self._serve, args=(sock, ready), name="fake-llm", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S):
            raise TimeoutError(f"fake LLM did not start within {_START_TIMEOUT_S}s")
        if self._error is not None:
            raise RuntimeError("fake LLM failed to start") from self._error

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.request_stop()
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise TimeoutError(f"fake LLM did not stop within {_STOP_TIMEOUT_S}s")
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        assert self._server is not None
        try:
            self._server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 -- handed to the starting thread, which raises it
            self._error = exc
        finally:
            sock.close()
            ready.set()

    def _app(self) -> Starlette:
        async def openai(request: Request) -> Response:
            return await self._handle(request, "openai")

        async def anthropic(request: Request) -> Response:
            return await self._handle(request, "anthropic")

        return Starlette(
            routes=[
                Route("/v1/chat/completions", openai, methods=["POST"]),
                Route("/v1/messages", anthropic, methods=["POST"]),
            ]
        )

    async def _handle(self, request: Request, wire: Wire) -> Response:
        try:
            body: object = json.loads(await request.body())
        except ValueError:
            body = None
        problem = _invalid_request(wire, body)
        if problem is not None:
            return _error_response(wire, 400, problem)
        assert isinstance(body, dict)
        with self._changed:
            recorded = RecordedRequest(
                wire=wire,
                body=body,
                headers={key.lower(): value for key, value in request.headers.items()},
                index=len(self._requests),
            )
            self._requests.append(recorded)
            item = self._script.popleft() if self._script else self._default
            self._changed.notify_all()
        if item is None:
            return _error_response(wire, 500, f"fake LLM script exhausted after {recorded.index} requests")
        if isinstance(item, _OUTCOMES):
            outcome = item
        else:
            try:
                outcome = await anyio.to_thread.run_sync(item, recorded)
            except Exception as exc:
                logger.exception("fake LLM script callable failed")
                return _error_response(wire, 500, f"fake LLM script callable raised {exc!r}")
        return self._render(recorded, outcome)

    def _render(self, request: RecordedRequest, outcome: Outcome) -> Response:
        match outcome:
            case Fail(status=status, retry_after=retry_after, message=error):
                return _error_response(request.wire, status, error, retry_after)
            case Raw(body=raw, status=status, headers=headers, media_type=media_type):
                return Response(raw, status_code=status, headers=headers, media_type=media_type)
            case Reply(text=text):
                step = Step(text=text)
            case CallTool():
                step = Step(tool_calls=(outcome,))
            case Step():
                step = outcome
        prefix = "toolu" if request.wire == "anthropic" else "call"
        calls = [
            (call.id or f"{prefix}_{next(self._ids)}", call.name, call.arguments) for call in step.tool_calls
        ]
        output = (step.text or "") + "".join(
            json.dumps({"name": name, "arguments": arguments}) for _, name, arguments in calls
        )
        tools = len(json.dumps(request.body["tools"])) if self._bill_tools and "tools" in request.body else 0
        input_tokens = tokens_for(request.input_chars + tools)
        output_tokens = tokens_for(len(output))
        with self._changed:
            self._billed.append(input_tokens + output_tokens)
        model = request.body["model"]
        number = request.index + 1
        if request.wire == "anthropic":
            content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
            content += [
                {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                for call_id, name, arguments in calls
            ]
            return JSONResponse(
                {
                    "id": f"msg_fake_{number}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": "tool_use" if calls else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": step.text}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for call_id, name, arguments in calls
            ]
        return JSONResponse(
            {
                "id": f"chatcmpl-fake-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
                ],
                "usage": {
                    "prompt_tokens": input_tokens,
                    "completion_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
            }
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake LLM that always gives the same reply.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--reply", default="hello")
    args = parser.parse_args(argv)
    with FakeLLM(default=Reply(args.reply), host=args.host, port=args.port) as fake:
        print(f"OpenAI-compatible base_url: {fake.openai_base_url}")
        print(f"Anthropic base_url:         {fake.anthropic_base_url}")
        print("Ctrl-C to stop.")
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
