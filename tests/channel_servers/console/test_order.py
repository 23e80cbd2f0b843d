"""Replies reach a terminal in the order they were sent, also while it is connecting."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from channel_servers.console.server import build_server
from channel_servers.console.settings import ConsoleSettings
from orchestrator.cli.chat_loop import ChatSession
from shared import unix_socket
from shared.channelkit.outbox import Outbox, OutboxEntry
from shared.protocol.console_wire import Hello, Reply, Welcome

pytestmark = pytest.mark.anyio

WAIT_S = 20


async def test_a_reply_sent_while_a_terminal_connects_comes_after_the_replies_queued_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ConsoleSettings(NEXO_CONSOLE_STATE_DIR=tmp_path)
    flushing = anyio.Event()
    release = anyio.Event()
    original = Outbox.pending

    async def slow_pending(self: Outbox, chat_id: str) -> list[OutboxEntry]:
        entries = await original(self, chat_id)
        flushing.set()
        await release.wait()
        return entries

    with anyio.fail_after(WAIT_S):
        async with Client(build_server(settings)) as client:
            queued = await client.call_tool("send_message", {"text": "queued before", "chat_id": "operator"})
            assert queued.structured_content is not None
            assert queued.structured_content["status"] == "queued"
            monkeypatch.setattr(Outbox, "pending", slow_pending)
            stream = await unix_socket.connect(settings.socket)
            async with stream, anyio.create_task_group() as tg:
                session = ChatSession(stream)
                await session.send(Hello(chat_id="operator"))
                assert isinstance(await session.receive(), Welcome)
                await flushing.wait()  # the terminal is connected and its queue is being read

                async def send_live() -> None:
                    await client.call_tool("send_message", {"text": "sent live", "chat_id": "operator"})

                tg.start_soon(send_live)
                await anyio.wait_all_tasks_blocked()
                release.set()
                frames = [await session.receive(), await session.receive()]
    assert [frame.text for frame in frames if isinstance(frame, Reply)] == ["queued before", "sent live"]
