"""A Unix socket in the state directory where ``nexo status`` asks the running orchestrator."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

StatusFn = Callable[[], dict[str, Any]]


def control_path(state_dir: Path) -> Path:
    return state_dir / "orchestrator.sock"


async def serve_control(
    path: Path, status: StatusFn, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # noqa: ASYNC240 -- once at startup, before serving
    old = os.umask(0o177)
    try:
        listener = await anyio.create_unix_listener(path)
    finally:
        os.umask(old)
    task_status.started()

    async def handle(stream: SocketStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            with contextlib.suppress(
                anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError
            ):
                command = (await reader.receive_until(b"\n", 1024)).decode().strip()
                body = status() if command == "status" else {"error": f"unknown command {command!r}"}
                await stream.send(json.dumps(body).encode() + b"\n")

    try:
        async with listener:
            await listener.serve(handle)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # noqa: ASYNC240 -- once at shutdown


async def ask_status(path: Path, timeout: float = 5.0) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        async with await anyio.connect_unix(path) as stream:
            await stream.send(b"status\n")
            reader = BufferedByteReceiveStream(stream)
            line = await reader.receive_until(b"\n", 1024 * 1024)
    data: dict[str, Any] = json.loads(line)
    return data
