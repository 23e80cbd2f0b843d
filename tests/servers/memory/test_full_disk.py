"""The memory server on a full disk: memory_remember is refused naming the database, what was stored
stays recallable, and remembering works again once space is freed."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from servers.memory.embeddings import Embedder
from servers.memory.settings import MemorySettings
from tests.full_disk import FullDisk, refusal, storage_status, until_refused
from tests.servers.memory.conftest import call, connect

pytestmark = pytest.mark.anyio


async def test_remembering_on_a_full_disk_is_refused_by_name_and_recall_still_answers(
    full_disk: FullDisk, embedder: Embedder
) -> None:
    settings = MemorySettings(state_dir=full_disk.root)
    with anyio.fail_after(60):
        async with connect(settings, embedder) as client:
            await call(client, "memory_remember", {"content": "Ana prefers green tea"})
            full_disk.fill()

            async def remember(n: int) -> types.CallToolResult:
                fact = f"fact number {n}: " + "the weekly report goes out on Fridays. " * 20
                return await client.call_tool("memory_remember", {"content": fact})

            answers = await until_refused(remember, refused=lambda result: bool(result.is_error))
            [content] = answers[-1].content
            assert isinstance(content, types.TextContent)
            assert content.text == f"Error executing tool memory_remember: {refusal(settings.database)}"
            assert [file.path for file in (await storage_status(client)).full] == [str(settings.database)]
            recalled = await call(client, "memory_recall", {"query": "what tea does Ana like"})
            assert "green tea" in str(recalled)
            note = {"op": "append", "section": "People", "text": "Ana: " + "green tea, no sugar. " * 400}
            noted = await client.call_tool("memory_note", note)
            [content] = noted.content
            assert isinstance(content, types.TextContent)
            assert content.text == f"Error executing tool memory_note: {refusal(settings.agents_dir)}"
            assert len((await storage_status(client)).full) == 2

            full_disk.free()
            await call(client, "memory_remember", {"content": "Ana's birthday is in May"})
            assert (await storage_status(client)).full == []
