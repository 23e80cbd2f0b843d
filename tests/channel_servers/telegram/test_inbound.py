"""Updates become durable channel events: once each, with the meta the orchestrator's admission reads."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from shared.protocol.events import AckParams, AckRequest, AckResult
from tests.channel_servers.support import pull
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import BOT_USERNAME, FakeTelegram

pytestmark = pytest.mark.anyio

ANA = 5550001
BEN = 5550002
GROUP = -1001234567890


async def test_a_private_message_is_stored_once_with_the_senders_numeric_id(tmp_path: Path) -> None:
    async with telegram_channel(tmp_path) as running:
        update_id = running.fake.inject(running.fake.message(ANA, "hello", first_name="Ana"), times=3)
        events = await pull(running.client)
        await running.fake.confirmed(update_id)
        again = await pull(running.client, after=events[-1].seq, count=0)
    assert [(event.dedupe_key, event.payload) for event in events] == [
        (
            f"msg:{ANA}:1",
            {
                "content": "hello",
                "meta": {
                    "chat_id": str(ANA),
                    "message_id": "1",
                    "user_id": str(ANA),
                    "user": "Ana",
                    "chat_type": "private",
                },
            },
        )
    ]
    assert again == []


async def test_a_forum_topic_is_a_chat_of_its_own_and_a_mention_is_flagged(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(GROUP, "supergroup", is_forum=True)
    async with telegram_channel(tmp_path, fake) as running:
        fake.inject(
            fake.message(
                BEN,
                f"@{BOT_USERNAME} status?",
                chat_id=GROUP,
                thread_id=7,
                extra={"entities": [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]},
            )
        )
        fake.inject(fake.message(BEN, "just chatting", chat_id=GROUP))
        events = await pull(running.client, count=2)
    metas = [event.payload["meta"] for event in events]
    assert metas == [
        {
            "chat_id": str(GROUP),
            "message_id": "1",
            "user_id": str(BEN),
            "user": "Ana",
            "chat_type": "supergroup",
            "thread_id": f"{GROUP}:7",
            "topic_id": "7",
            "mentioned": "true",
        },
        {
            "chat_id": str(GROUP),
            "message_id": "2",
            "user_id": str(BEN),
            "user": "Ana",
            "chat_type": "supergroup",
        },
    ]


async def test_a_start_deep_link_hands_its_payload_on(tmp_path: Path) -> None:
    async with telegram_channel(tmp_path) as running:
        running.fake.inject(running.fake.message(ANA, "/start K7Q2MX"))
        events = await pull(running.client)
    assert events[0].payload["content"] == "/start K7Q2MX"
    assert events[0].payload["meta"]["start_payload"] == "K7Q2MX"


async def test_edits_are_ignored_unless_configured_as_new_messages(tmp_path: Path) -> None:
    async with telegram_channel(tmp_path / "off") as running:
        fake = running.fake
        fake.inject(fake.message(ANA, "edited", edited=True, extra={"edit_date": 1_700_000_100}))
        last = fake.inject(fake.message(ANA, "plain"))
        await fake.confirmed(last)
        ignored = await pull(running.client)
    async with telegram_channel(tmp_path / "on", edits_as_messages=True) as running:
        fake = running.fake
        fake.inject(fake.message(ANA, "edited", edited=True, extra={"edit_date": 1_700_000_100}))
        kept = await pull(running.client)
    assert [event.payload["content"] for event in ignored] == ["plain"]
    assert [(event.dedupe_key, event.payload["meta"]["edited"]) for event in kept] == [
        (f"edit:{ANA}:1:1700000100", "true")
    ]


async def test_the_offset_never_moves_past_an_update_that_was_not_stored(tmp_path: Path) -> None:
    async with telegram_channel(tmp_path, max_pending=1) as running:
        fake, waits = running.fake, running.waits
        waits.hold = anyio.Event()
        first = fake.inject(fake.message(ANA, "one"))
        second = fake.inject(fake.message(ANA, "two"))
        events = await pull(running.client)
        with anyio.fail_after(5):
            await waits.paused.wait()  # "two" found the inbox full: polling pauses, unconfirmed
        confirmed_while_full = fake.confirmed_offset
        await running.client.session.send_request(
            AckRequest(params=AckParams(seqs=[events[0].seq])), AckResult
        )
        waits.hold.set()
        later = await pull(running.client, after=events[0].seq)
        await fake.confirmed(second)
    assert confirmed_while_full <= second
    assert [event.payload["content"] for event in events + later] == ["one", "two"]
    assert first < second
