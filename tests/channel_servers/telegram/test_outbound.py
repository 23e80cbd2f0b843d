"""Replies reach Telegram in order, formatted, split to its limit, and its errors end as the kit says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from channel_servers.telegram.api import BotApi, NetworkError
from tests.channel_servers.support import Waits, pull
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import MAX_TEXT, TOKEN, FakeTelegram
from tests.mesh.harness import free_port

pytestmark = pytest.mark.anyio

ANA = 5550001
BEN = 5550002
GROUP = -1001234567890


async def send(client: Client, chat_id: str, text: str, **extra: Any) -> Any:
    return await client.call_tool("send_message", {"text": text, "chat_id": chat_id, **extra})


def long_reply() -> str:
    """About 20,000 characters of Markdown: headings, emphasis, links, lists and code blocks."""
    sections = []
    for number in range(40):
        code = "\n".join(f"    total_{number} += values[{line}]  # <{line}> & more" for line in range(12))
        sections.append(
            f"## Step {number}\n\nThis is **step {number}** of the _plan_, see "
            f"[the docs](https://example.org/{number}) and `inline_{number} < 3`.\n\n"
            f"- first point of {number}\n- second point with *emphasis*\n\n"
            f"```python\ndef step_{number}(values):\n    total_{number} = 0\n{code}\n"
            f"    return total_{number}\n```\n"
        )
    return "\n".join(sections)


async def test_a_long_reply_arrives_as_ordered_valid_html_parts_within_the_limit(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    reply = long_reply()
    async with telegram_channel(tmp_path, fake) as running:
        result = await send(running.client, str(ANA), reply, idempotency_key="long")
    assert len(reply) > 20_000
    parts = fake.sent_to(ANA)
    assert len(parts) >= 5
    assert all(part.parse_mode == "HTML" for part in parts)  # the stand-in parsed every one
    assert all(len(part.text.encode("utf-16-le")) // 2 <= MAX_TEXT for part in parts)
    assert [part.message_id for part in parts] == list(range(1, len(parts) + 1))
    shown = "\n".join(part.text for part in parts)
    positions = [shown.index(f"def step_{number}(values):") for number in range(40)]
    assert positions == sorted(positions)
    assert "total_39 += values[11]  # <11> & more" in shown
    assert result.structured_content["platform_message_id"] == ",".join(
        str(part.message_id) for part in parts
    )


async def test_a_part_refused_for_its_formatting_is_sent_once_more_as_plain_text(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.fail_next("sendMessage", 400, 'Bad Request: can\'t parse entities: Unsupported start tag "x"')
    async with telegram_channel(tmp_path, fake) as running:
        result = await send(running.client, str(ANA), "**bold** and `code`")
    assert [(call["text"], call.get("parse_mode")) for call in fake.calls_of("sendMessage")] == [
        ("<b>bold</b> and <code>code</code>", "HTML"),
        ("bold and code", None),
    ]
    assert result.structured_content["status"] == "sent"


async def test_an_answer_goes_to_the_forum_topic_it_names_or_quotes(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(GROUP, "supergroup", is_forum=True)
    async with telegram_channel(tmp_path, fake) as running:
        fake.inject(fake.message(ANA, "in topic 9", chat_id=GROUP, thread_id=9))
        [event] = await pull(running.client)
        meta = event.payload["meta"]
        await send(running.client, meta["chat_id"], "quoting", reply_to=meta["message_id"])
        await send(running.client, meta["thread_id"], "unprompted")
        await send(running.client, f"{GROUP}:7", "on it", reply_to="3")
    assert [(sent.thread_id, sent.reply_to, sent.text) for sent in fake.sent_to(GROUP)] == [
        (9, 1, "quoting"),
        (9, None, "unprompted"),
        (7, 3, "on it"),
    ]


async def test_too_many_requests_waits_the_retry_after_telegram_names(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3, times=2)
    async with telegram_channel(tmp_path, fake) as running:
        result = await send(running.client, str(ANA), "hi")
    assert running.waits.seconds == [3.0, 3.0]
    assert result.structured_content["status"] == "sent"
    assert [sent.text for sent in fake.sent_to(ANA)] == ["hi"]


async def test_a_retry_after_longer_than_the_cap_leaves_the_reply_queued(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 300", retry_after=300)
    async with telegram_channel(tmp_path, fake, max_retry_wait_s=30) as running:
        queued = await send(running.client, str(ANA), "later")
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"
    assert running.waits.seconds == []


async def test_while_telegram_fails_a_reply_waits_and_goes_out_when_the_chat_writes(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.fail_next("sendMessage", 502, "Bad Gateway", times=5)
    async with telegram_channel(tmp_path, fake, max_retries=4) as running:
        queued = await send(running.client, str(ANA), "later")
        fake.inject(fake.message(ANA, "are you there?"))
        await pull(running.client)
        await fake.sent_count(1)
    assert queued.structured_content["status"] == "queued"
    assert running.waits.seconds == [0.5, 1.0, 2.0, 4.0]
    assert [sent.text for sent in fake.sent_to(ANA)] == ["later"]


@pytest.mark.parametrize(
    ("blocked", "chat_id", "reason"),
    [
        (True, str(ANA), "Telegram answered 403: Forbidden: bot was blocked by the user"),
        (False, "987654", "Telegram answered 400: Bad Request: chat not found"),
    ],
)
async def test_a_blocked_bot_or_an_unknown_chat_fails_once_and_for_good(
    tmp_path: Path, blocked: bool, chat_id: str, reason: str
) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    if blocked:
        fake.blocked.add(ANA)
    async with telegram_channel(tmp_path, fake) as running:
        first = await send(running.client, chat_id, "hi", idempotency_key="k1")
        again = await send(running.client, chat_id, "hi", idempotency_key="k1")
    assert first.is_error
    assert reason in first.content[0].text
    assert again.structured_content == {
        "status": "duplicate",
        "message_id": "1",
        "platform_message_id": None,
        "state": "failed",
    }
    assert len(fake.calls_of("sendMessage")) == 1
    assert running.waits.seconds == []


async def test_a_wait_for_one_chat_does_not_hold_up_another(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(ANA)
    fake.chat(BEN)
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 5", retry_after=5)
    async with telegram_channel(tmp_path, fake) as running:
        running.waits.hold = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(send, running.client, str(ANA), "for Ana")
            with anyio.fail_after(5):
                await running.waits.paused.wait()  # Ana's message waits out its retry_after ...
            await send(running.client, str(BEN), "for Ben")  # ... while Ben's goes out
            sent_while_waiting = [sent.text for sent in fake.sent]
            running.waits.hold.set()
    assert sent_while_waiting == ["for Ben"]
    assert [sent.text for sent in fake.sent] == ["for Ben", "for Ana"]


async def test_an_unreachable_api_is_retried_with_backoff_then_reported_without_the_token() -> None:
    waits = Waits()
    async with httpx2.AsyncClient() as http:
        api = BotApi(http, f"http://127.0.0.1:{free_port()}", TOKEN, max_retries=3, sleep=waits)
        with pytest.raises(NetworkError) as raised:
            await api.call_retrying("getMe")
    assert waits.seconds == [0.5, 1.0, 2.0]
    assert not raised.value.sent
    assert TOKEN.split(":")[1] not in str(raised.value)


async def test_a_reply_queued_for_a_topic_goes_out_when_that_topic_writes(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(GROUP, "supergroup", is_forum=True)
    fake.fail_next("sendMessage", 502, "Bad Gateway", times=5)
    async with telegram_channel(tmp_path, fake, max_retries=4) as running:
        queued = await send(running.client, f"{GROUP}:7", "for topic 7")
        fake.inject(fake.message(ANA, "back", chat_id=GROUP, thread_id=7))
        await pull(running.client)
        await fake.sent_count(1)
    assert queued.structured_content is not None
    assert queued.structured_content["status"] == "queued"
    assert [(sent.thread_id, sent.text) for sent in fake.sent_to(GROUP)] == [(7, "for topic 7")]
