"""The console's socket hub: a terminal that stops reading never holds up the others."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from channel_servers.console import hub as hub_module
from channel_servers.console.hub import ChatClient, Hub
from shared import unix_socket
from shared.protocol.console_wire import Hello, Reply, Say, encode

pytestmark = pytest.mark.anyio


async def test_a_chat_that_stops_reading_is_disconnected_and_the_others_still_get_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "SEND_TIMEOUT_S", 0.2)
    hellos: list[str] = []

    async def on_hello(client: ChatClient) -> None:
        hellos.append(client.chat_id)

    async def on_say(client: ChatClient, say: Say) -> None:
        return None

    hub = Hub(tmp_path / "console.sock", on_hello=on_hello, on_say=on_say)
    big = Reply(message_id="1", text="x" * 60_000)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(hub.serve)
            stalled = await unix_socket.connect(tmp_path / "console.sock")
            await stalled.send(encode(Hello(chat_id="operator")))
            while len(hellos) < 1:
                await anyio.wait_all_tasks_blocked()
            reached = [await hub.deliver("operator", big) for _ in range(40)]
            assert reached[-1] == 0  # the stalled terminal was dropped instead of blocking forever
            assert hub.clients == []
            await stalled.aclose()
            tg.cancel_scope.cancel()
    assert reached[0] == 1
