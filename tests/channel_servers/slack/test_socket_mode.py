"""Socket Mode intake: events become durable channel events, once each, acknowledged after storing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.channel_servers.slack.support import ANA, DM, GENERAL, dm, mention, slack_channel
from tests.channel_servers.support import pull
from tests.fakes.slack_api import BOT_ID, BOT_USER, FakeSlack

pytestmark = pytest.mark.anyio


async def test_a_dm_is_stored_once_and_acknowledged_only_after(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        running.fake.inject(dm("hello", "1700000000.000100"))
        running.fake.inject(dm("hello", "1700000000.000100"))  # Slack retried it under a new envelope
        events = await pull(running.client)
        with anyio.fail_after(5):
            await running.fake.all_acked()
        again = await pull(running.client, after=events[-1].seq, count=0)
    assert [(event.dedupe_key, event.payload) for event in events] == [
        (
            f"{DM}:1700000000.000100",
            {
                "content": "hello",
                "meta": {"chat_id": DM, "message_id": "1700000000.000100", "user_id": ANA, "chat_type": "im"},
            },
        )
    ]
    assert again == []
    assert running.fake.acked == ["env-1", "env-2"]


async def test_a_mention_in_a_channel_is_a_thread_and_its_session(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        running.fake.inject(mention("summarise this", "1700000000.000200"))
        running.fake.inject(mention("and this", "1700000000.000300", thread_ts="1700000000.000200"))
        # The same message seen as a channel message too (message.channels): stored once.
        running.fake.inject(
            {
                "type": "message",
                "channel": GENERAL,
                "user": ANA,
                "ts": "1700000000.000300",
                "thread_ts": "1700000000.000200",
                "text": "<@UBOT0001> and this",
            }
        )
        events = await pull(running.client, count=2)
        with anyio.fail_after(5):
            await running.fake.all_acked()
        more = await pull(running.client, after=events[-1].seq, count=0)
    thread = f"{GENERAL}:1700000000.000200"
    assert [(event.payload["content"], event.payload["meta"]) for event in events] == [
        (
            "summarise this",
            {
                "chat_id": GENERAL,
                "message_id": "1700000000.000200",
                "user_id": ANA,
                "chat_type": "channel",
                "thread_id": thread,
                "mentioned": "true",
            },
        ),
        (
            "and this",
            {
                "chat_id": GENERAL,
                "message_id": "1700000000.000300",
                "user_id": ANA,
                "chat_type": "channel",
                "thread_id": thread,
                "mentioned": "true",
            },
        ),
    ]
    assert more == []


async def test_messages_from_bots_edits_and_deletions_are_never_answered(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        running.fake.inject(dm("from another bot", "1700000000.000001", user="UOTHERBOT", bot_id="BOTHER"))
        running.fake.inject(
            {
                "type": "message",
                "subtype": "bot_message",
                "channel": DM,
                "channel_type": "im",
                "bot_id": "BOTHER",
                "text": "hi bot",
                "ts": "1700000000.000002",
            }
        )
        running.fake.inject(dm("my own echo", "1700000000.000003", user=BOT_USER, bot_id=BOT_ID))
        running.fake.inject(mention("hey other bot", "1700000000.000004", user="UOTHERBOT", bot_id="BOTHER"))
        running.fake.inject(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": DM,
                "channel_type": "im",
                "message": {
                    "user": ANA,
                    "text": "edited",
                    "ts": "1700000000.000009",
                    "edited": {"user": ANA, "ts": "1700000001.000000"},
                },
                "ts": "1700000001.000000",
            }
        )
        running.fake.inject(
            {
                "type": "message",
                "subtype": "message_deleted",
                "channel": DM,
                "channel_type": "im",
                "deleted_ts": "1700000000.000009",
                "ts": "1700000002.000000",
            }
        )
        running.fake.inject(
            {"type": "message", "channel": GENERAL, "user": ANA, "text": "chatter", "ts": "1700000000.000005"}
        )
        running.fake.inject(dm("a person", "1700000000.000006"))
        events = await pull(running.client)
        with anyio.fail_after(5):
            await running.fake.all_acked()
        more = await pull(running.client, after=events[-1].seq, count=0)
    assert [event.payload["content"] for event in events + more] == ["a person"]
    assert len(running.fake.acked) == 8


async def test_edits_can_be_answered_as_new_messages(tmp_path: Path) -> None:
    async with slack_channel(tmp_path, edits="as_message") as running:
        running.fake.inject(
            {
                "type": "message",
                "subtype": "message_changed",
                "channel": DM,
                "channel_type": "im",
                "message": {
                    "user": ANA,
                    "text": "fixed typo",
                    "ts": "1700000000.000009",
                    "edited": {"user": ANA, "ts": "1700000001.000000"},
                },
                "ts": "1700000001.000000",
            }
        )
        events = await pull(running.client)
    assert [
        (event.dedupe_key, event.payload["content"], event.payload["meta"].get("edited")) for event in events
    ] == [(f"{DM}:1700000000.000009:edit:1700000001.000000", "fixed typo", "true")]


async def test_a_refresh_in_the_middle_of_a_burst_loses_nothing(tmp_path: Path) -> None:
    fake = FakeSlack(drop_after=7)
    async with slack_channel(tmp_path, fake) as running:
        for n in range(1, 41):
            running.fake.inject(dm(f"m{n}", f"1700000000.{n:06d}"))
        events = await pull(running.client, count=40)
        with anyio.fail_after(10):
            await running.fake.all_acked()
        more = await pull(running.client, after=events[-1].seq, count=0)
    assert sorted(event.payload["content"] for event in events) == sorted(f"m{n}" for n in range(1, 41))
    assert more == []
    assert running.fake.connections == 2


async def test_an_event_is_acknowledged_only_once_it_is_stored(tmp_path: Path) -> None:
    async with slack_channel(tmp_path, max_pending=1) as running:
        running.fake.inject(dm("first", "1700000000.000001"))
        running.fake.inject(dm("second", "1700000000.000002"))
        events = await pull(running.client)
        with anyio.fail_after(5):
            while len(running.fake.acked) < 1:
                await running.fake.changed()
        await running.fake.refresh()  # the inbox is still full: the second stays with Slack
        with anyio.fail_after(5):
            while running.fake.connections < 2:
                await running.fake.changed()
    assert [event.payload["content"] for event in events] == ["first"]
    assert running.fake.acked == ["env-1"]
