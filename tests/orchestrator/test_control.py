"""The control socket: one request line, one answer line; a client that hangs up cancels its request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.control import Emit, ask, serve_control
from shared import unix_socket

pytestmark = pytest.mark.anyio


def _status() -> dict[str, Any]:
    return {"pid": 1}


async def test_a_request_is_answered_and_a_long_one_is_cancelled_when_its_client_hangs_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "orchestrator.sock"
    started, cancelled = anyio.Event(), anyio.Event()

    async def commands(request: dict[str, Any], emit: Emit) -> dict[str, Any]:
        if request["op"] == "echo":
            return {"echo": request["value"]}
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(serve_control, path, _status, commands)
            assert await ask(path, "status") == {"pid": 1}
            assert await ask(path, {"op": "echo", "value": 3}) == {"echo": 3}
            async with await unix_socket.connect(path) as client:
                await client.send(b'{"op": "wait"}\n')
                await started.wait()
            await cancelled.wait()
            assert await ask(path, {"op": "echo", "value": 4}) == {"echo": 4}
            tg.cancel_scope.cancel()
