"""Replies: posted in the thread, split at Slack's limit, rendered as mrkdwn, 429 honoured per method,
permanent refusals reported as failed and told to the operator once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from channel_servers.slack.outbound import MAX_MESSAGE
from tests.channel_servers.slack.support import DM, GENERAL, mention, slack_channel
from tests.channel_servers.support import pull
from tests.fakes.slack_api import FakeSlack

pytestmark = pytest.mark.anyio

THREAD = f"{GENERAL}:1700000000.000200"


async def test_a_reply_goes_into_the_thread_as_mrkdwn(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        result = await running.client.call_tool(
            "send_message",
            {"text": "**Done**: see [the doc](https://example.com/a) & <!channel>", "chat_id": THREAD},
        )
    assert result.structured_content is not None
    assert result.structured_content["status"] == "sent"
    assert [(p.method, p.params) for p in running.fake.posted] == [
        (
            "chat.postMessage",
            {
                "channel": GENERAL,
                "thread_ts": "1700000000.000200",
                "mrkdwn": True,
                "text": "*Done*: see <https://example.com/a|the doc> &amp; &lt;!channel&gt;",
            },
        )
    ]


async def test_a_long_reply_is_split_at_slacks_limit_in_order(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {n}: " + "word " * 300 for n in range(1, 9)]
    async with slack_channel(tmp_path) as running:
        result = await running.client.call_tool(
            "send_message", {"text": "\n\n".join(paragraphs), "chat_id": DM}
        )
    texts = [str(p.params["text"]) for p in running.fake.posted]
    assert result.structured_content is not None
    assert result.structured_content["platform_message_id"] == ",".join(p.ts for p in running.fake.posted)
    assert len(texts) > 1
    assert all(len(text) <= MAX_MESSAGE for text in texts)
    assert " ".join(" ".join(texts).split()) == " ".join(" ".join(paragraphs).split())
    assert all("thread_ts" not in p.params for p in running.fake.posted)


async def test_a_429_is_waited_out_for_its_retry_after_on_that_method(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake) as running:
        fake.limit("chat.postMessage", 3, 7)
        result = await running.client.call_tool("send_message", {"text": "hi", "chat_id": DM})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "sent"
    assert running.waits.seconds == pytest.approx([3.0, 7.0], abs=0.5)
    assert len(fake.posted) == 1


async def test_a_429_longer_than_allowed_leaves_the_reply_queued(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, max_retry_wait_s=30) as running:
        fake.limit("chat.postMessage", 120)
        result = await running.client.call_tool("send_message", {"text": "later", "chat_id": DM})
    assert result.structured_content is not None
    assert result.structured_content["status"] == "queued"
    assert fake.posted == []


@pytest.mark.parametrize(
    ("chat_id", "error"), [("C0000009", "not_in_channel"), ("C0000077", "channel_not_found")]
)
async def test_a_channel_slack_refuses_fails_for_good_and_the_operator_is_told_once(
    tmp_path: Path, chat_id: str, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with slack_channel(tmp_path) as running:
        with caplog.at_level(logging.ERROR, logger="nexo.slack"):
            first = await running.client.call_tool("send_message", {"text": "a", "chat_id": chat_id})
            second = await running.client.call_tool("send_message", {"text": "b", "chat_id": chat_id})
    assert first.is_error
    assert second.is_error
    assert error in str(first.content)
    told = [record.getMessage() for record in caplog.records if error in record.getMessage()]
    assert len(told) == 1
    assert "nexo channel doctor" in told[0] or "chat id" in told[0]


async def test_a_revoked_token_is_a_permanent_failure_told_once_without_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake) as running:
        fake.revoked = True
        with caplog.at_level(logging.DEBUG):
            first = await running.client.call_tool("send_message", {"text": "a", "chat_id": DM})
            second = await running.client.call_tool("send_message", {"text": "b", "chat_id": GENERAL})
    assert first.is_error
    assert second.is_error
    assert "token_revoked" in str(first.content)
    told = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert len([line for line in told if "token_revoked" in line]) == 1
    assert all(fake.bot_token not in record.getMessage() for record in caplog.records)
    assert all(fake.app_token not in record.getMessage() for record in caplog.records)


async def test_a_chat_id_that_is_not_slacks_is_refused_with_the_fix(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        result = await running.client.call_tool("send_message", {"text": "a", "chat_id": "general"})
    assert result.is_error
    assert "is not a Slack chat" in str(result.content)
    assert running.fake.posted == []


async def test_an_answer_goes_into_the_thread_of_the_message_it_answers_even_after_a_restart(
    tmp_path: Path,
) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake) as running:
        fake.inject(mention("first", "1700000000.000200"))
        fake.inject(mention("second", "1700000000.000300", thread_ts="1700000000.000200"))
        events = await pull(running.client, count=2)
    # A new process on the same state directory: the thread is remembered on disk.
    async with slack_channel(tmp_path, fake) as running:
        for event in events:
            meta = event.payload["meta"]
            await running.client.call_tool(
                "send_message", {"text": "ok", "chat_id": meta["chat_id"], "reply_to": meta["message_id"]}
            )
        await running.client.call_tool(
            "send_message", {"text": "dm", "chat_id": DM, "reply_to": "1700000000.000999"}
        )
    assert [event.payload["meta"]["thread_id"] for event in events] == [THREAD, THREAD]
    assert [(p.params["channel"], p.params.get("thread_ts")) for p in fake.posted] == [
        (GENERAL, "1700000000.000200"),
        (GENERAL, "1700000000.000200"),
        (DM, None),
    ]
