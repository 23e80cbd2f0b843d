"""progress_while: a start, periodic ticks while the block runs, and an end, in increasing order."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import Context

from shared.protocol.policy import READ_ONLY_HINTS
from shared.serverkit import NexoServer, progress_while

pytestmark = pytest.mark.anyio


async def test_progress_ticks_while_a_long_tool_runs_and_ends_with_finished() -> None:
    ticked = anyio.Event()
    reports: list[tuple[float, float | None, str | None]] = []
    server: NexoServer[Any] = NexoServer("probe", instructions="A server with one long tool.")

    @server.tool(title="Wait for a tick", annotations=READ_ONLY_HINTS)
    async def wait_for_tick(*, ctx: Context[Any]) -> str:
        """Run until one progress tick has gone out."""
        async with progress_while(ctx, total=30, every_s=0.01):
            await ticked.wait()
        return "done"

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))
        if message == "running":
            ticked.set()

    with anyio.fail_after(10):
        async with Client(server) as client:
            result = await client.call_tool("wait_for_tick", {}, progress_callback=on_progress)
    assert result.is_error is False
    messages = [message for _, _, message in reports]
    assert (messages[0], messages[-1], "running" in messages[1:-1]) == ("started", "finished", True)
    values = [progress for progress, _, _ in reports]
    assert values == sorted(set(values))
    assert {total for _, total, _ in reports} == {30}
