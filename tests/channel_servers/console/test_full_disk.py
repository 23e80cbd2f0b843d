"""A console whose disk is full refuses each message with one clear sentence and keeps serving."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import Client

from channel_servers.console.server import build_server
from channel_servers.console.settings import ConsoleSettings
from orchestrator.cli.chat_loop import ChatSession
from shared import unix_socket
from shared.protocol.console_wire import Error, Hello, Queued, Say, Welcome
from shared.protocol.events import PullParams, PullRequest, PullResult
from shared.protocol.storage import StorageStatusParams, StorageStatusRequest, StorageStatusResult
from tests.full_disk import FullDisk

pytestmark = pytest.mark.anyio

MESSAGES = 5
WAIT_S = 20


@asynccontextmanager
async def chat(settings: ConsoleSettings) -> AsyncIterator[ChatSession]:
    stream = await unix_socket.connect(settings.socket)
    async with stream:
        session = ChatSession(stream)
        await session.send(Hello(chat_id="operator"))
        assert isinstance(await session.receive(), Welcome)
        yield session


async def say(session: ChatSession, text: str) -> Queued | Error:
    await session.send(Say(id=text, text=text))
    frame = await session.receive()
    assert isinstance(frame, Queued | Error), frame
    return frame


async def storage(client: Client) -> StorageStatusResult:
    request = StorageStatusRequest(params=StorageStatusParams())
    return await client.session.send_request(request, StorageStatusResult)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def test_messages_typed_on_a_full_disk_are_refused_by_name_and_the_console_stays_up(
    full_disk: FullDisk, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ConsoleSettings(NEXO_CONSOLE_STATE_DIR=full_disk.root)
    database = settings.database
    refusal = (
        f"not stored: the disk holding {database} is full. Fix: free space on that filesystem (`df -h` "
        "shows it); nothing stored before was lost, and writes resume by themselves"
    )
    with anyio.fail_after(WAIT_S):
        async with Client(build_server(settings)) as client, chat(settings) as session:
            assert isinstance(await say(session, "before"), Queued)
            full_disk.fill()
            answers = [await say(session, f"full-{n}") for n in range(MESSAGES)]
            refused = [frame for frame in answers if isinstance(frame, Error)]
            assert refused, "no message was refused on a full disk"
            assert {frame.message for frame in refused} == {refusal}

            reply = await client.call_tool("send_message", {"text": "hello", "chat_id": "operator"})
            assert reply.is_error
            assert text_of(reply) == f"Error executing tool send_message: {refusal}"
            (while_full,) = (await storage(client)).files
            assert (while_full.path, while_full.full, while_full.free_bytes) == (str(database), True, 0)

            full_disk.free()
            assert isinstance(await say(session, "after"), Queued)
            (freed,) = (await storage(client)).files
            assert (freed.full, freed.since) == (False, None)
            pulled = await client.session.send_request(
                PullRequest(params=PullParams(kinds=["message"], limit=50)), PullResult
            )
    texts = [event.payload["content"] for event in pulled.events]
    assert texts[0] == "before"
    assert texts[-1] == "after"
    assert len(texts) == 2 + MESSAGES - len(refused)
    # The log says it once when the disk fills and once when it has space again, not per message.
    logged = [(r.name, r.levelname) for r in caplog.records if r.levelno >= logging.WARNING]
    assert logged == [("nexo.storage", "ERROR"), ("nexo.storage", "WARNING")]
