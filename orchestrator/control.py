"""A Unix socket in the state directory where ``nexo status`` asks the running orchestrator."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from shared import unix_socket
from shared.unix_socket import UnixStream

StatusFn = Callable[[], dict[str, Any]]
Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one ``{"progress": ...}`` line ahead of a request's answer (for a client that asked for it)."""
CommandFn = Callable[[dict[str, Any], Emit], Awaitable[dict[str, Any]]]
MAX_COMMAND_BYTES = 64 * 1024


async def serve_control(
    path: Path,
    status: StatusFn,
    commands: CommandFn | None = None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """One request line per connection: ``status``, or a JSON object ``{"op": ...}`` for ``commands``."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # noqa: ASYNC240 -- once at startup, before serving
    # The mode is set on the socket itself: the state directory (0700) keeps others out until then.
    listener = await unix_socket.listen(path, mode=0o600)
    task_status.started()

    async def handle(stream: UnixStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            with contextlib.suppress(
                anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError
            ):
                command = (await reader.receive_until(b"\n", MAX_COMMAND_BYTES)).decode().strip()

                async def emit(progress: dict[str, Any]) -> None:
                    await stream.send(json.dumps({"progress": progress}).encode() + b"\n")

                body = await _answered_while_connected(reader, _answer(command, status, commands, emit))
                if body is not None:
                    await stream.send(json.dumps(body).encode() + b"\n")

    try:
        async with listener:
            await listener.serve(handle)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # noqa: ASYNC240 -- once at shutdown


async def _answered_while_connected(
    reader: BufferedByteReceiveStream, answer: Awaitable[dict[str, Any]]
) -> dict[str, Any] | None:
    """The answer, or None when the client hung up first: a client sends nothing after its request
    line, so anything it does next (closing, Ctrl-C) ends the request, and a long one (``nexo agent
    run`` waiting for its goal) is cancelled with it."""
    body: dict[str, Any] | None = None
    async with anyio.create_task_group() as tg:

        async def hang_up() -> None:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await reader.receive()
            tg.cancel_scope.cancel()

        tg.start_soon(hang_up)
        body = await answer
        tg.cancel_scope.cancel()
    return body


async def _answer(command: str, status: StatusFn, commands: CommandFn | None, emit: Emit) -> dict[str, Any]:
    if command == "status":
        return status()
    try:
        request = json.loads(command)
    except json.JSONDecodeError:
        return {"error": f"unknown command {command[:80]!r}"}
    if not isinstance(request, dict) or commands is None:
        return {"error": "expected a JSON object with an op"}
    return await commands(request, emit)


async def ask(
    path: Path, request: str | dict[str, Any], timeout: float | None = 5.0, *, max_bytes: int = 1024 * 1024
) -> dict[str, Any]:
    """Send one request and read its answer (at most ``max_bytes``); ``timeout=None`` waits as long
    as the request runs."""
    line = request if isinstance(request, str) else json.dumps(request)
    with anyio.fail_after(timeout):
        async with await unix_socket.connect(path) as stream:
            await stream.send(line.encode() + b"\n")
            reader = BufferedByteReceiveStream(stream)
            answer = await reader.receive_until(b"\n", max_bytes)
    data: dict[str, Any] = json.loads(answer)
    return data


async def ask_with_progress(
    path: Path, request: dict[str, Any], on_progress: Callable[[dict[str, Any]], Awaitable[None]]
) -> dict[str, Any]:
    """Send one request and read its answer, handing each ``{"progress": ...}`` line before it to
    ``on_progress``; waits as long as the request runs (closing the connection cancels it)."""
    async with await unix_socket.connect(path) as stream:
        await stream.send(json.dumps(request).encode() + b"\n")
        reader = BufferedByteReceiveStream(stream)
        while True:
            line: dict[str, Any] = json.loads(await reader.receive_until(b"\n", 1024 * 1024))
            progress = line.get("progress")
            if not isinstance(progress, dict) or len(line) != 1:
                return line
            await on_progress(progress)


async def ask_status(path: Path, timeout: float = 5.0) -> dict[str, Any]:
    return await ask(path, "status", timeout)
