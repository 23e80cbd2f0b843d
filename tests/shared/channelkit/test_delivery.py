"""Delivery to one chat is strictly ordered: a reply never overtakes an older queued message."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.shared.test_channelkit_kit import Platform, build, send_message

pytestmark = pytest.mark.anyio


async def test_a_reply_racing_a_flush_waits_for_the_older_message(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        queued = await send_message(client, text="older notice", chat_id="c2", notice=True)
        platform.reachable.add("c2")
        platform.held.add("older notice")
        replies: list[object] = []
        async with anyio.create_task_group() as tg:

            async def flush() -> None:
                await platform.live.flush("c2")

            async def reply() -> None:
                replies.append((await send_message(client, text="reply", chat_id="c2")).structured_content)

            tg.start_soon(flush)
            with anyio.fail_after(5):
                await platform.entered.wait()
            tg.start_soon(reply)
            with anyio.fail_after(5):
                while await platform.live.outbox.get(2) is None:  # the reply is in the outbox
                    await anyio.wait_all_tasks_blocked()
            await anyio.wait_all_tasks_blocked()
            sent_while_held = list(platform.sent)
            platform.release.set()
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"
    assert sent_while_held == []
    assert platform.sent == [("c2", "older notice", None), ("c2", "reply", None)]
    assert replies == [{"status": "sent", "message_id": "2", "platform_message_id": "p-2", "state": "sent"}]


async def test_a_reply_to_a_chat_with_queued_messages_goes_out_after_them(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        await send_message(client, text="one", chat_id="c2")
        await send_message(client, text="two", chat_id="c2")
        platform.reachable.add("c2")  # back, but nobody flushed yet
        reply = await send_message(client, text="three", chat_id="c2")
    assert reply.structured_content is not None
    assert reply.structured_content["status"] == "sent"
    assert [text for _, text, _ in platform.sent] == ["one", "two", "three"]


async def test_a_reply_behind_a_message_that_still_cannot_go_out_is_queued_behind_it(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)) as client:
        await send_message(client, text="one", chat_id="c2")
        reply = await send_message(client, text="two", chat_id="c2")
        platform.reachable.add("c2")
        delivered = await platform.live.flush("c2")
    assert reply.structured_content is not None
    assert reply.structured_content["status"] == "queued"
    assert delivered == 2
    assert [text for _, text, _ in platform.sent] == ["one", "two"]
