"""Replies to WhatsApp: split and formatted, the 24-hour window, and every platform error mapped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from channel_servers.whatsapp.server import TokenRefused
from shared.hosting.errors import startup_failure
from tests.channel_servers.whatsapp.conftest import CONTACT, running
from tests.fakes.whatsapp_api import TEXT_LIMIT, WINDOW_S

pytestmark = pytest.mark.anyio


def error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


def long_reply() -> str:
    """About 20,000 characters: numbered paragraphs with fenced code blocks among them."""
    blocks = []
    for n in range(1, 121):
        blocks.append(f"Paragraph {n:04d} says **something** about step {n} of the plan, at some length.")
        if n % 10 == 0:
            code = "\n".join(f"print('row {n:04d}-{i:02d}')  # keep going" for i in range(40))
            blocks.append(f"```python\n{code}\n```")
    return "\n\n".join(blocks)


async def test_a_20000_character_reply_arrives_as_ordered_parts_within_the_limit(tmp_path: Path) -> None:
    text = long_reply()
    assert len(text) >= 20_000
    async with running(tmp_path) as wa:
        await wa.deliver(wa.fake.text(CONTACT, "tell me everything"))
        result = await wa.send(text, idempotency_key="long")
    bodies = [m["text"]["body"] for m in wa.fake.messages("text")]
    assert result.structured_content["status"] == "sent"
    assert len(bodies) >= 5
    assert all(0 < len(body) <= TEXT_LIMIT for body in bodies)
    assert all(body.count("```") % 2 == 0 for body in bodies)
    numbers = [int(n) for n in re.findall(r"Paragraph (\d{4})", "".join(bodies))]
    rows = re.findall(r"row (\d{4}-\d{2})", "".join(bodies))
    assert numbers == list(range(1, 121))
    assert rows == sorted(rows)
    assert len(rows) == 12 * 40
    assert "*something*" in bodies[0]
    assert "**" not in bodies[0]


async def test_inside_the_window_a_reply_is_sent_as_text(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.deliver(wa.fake.text(CONTACT, "hi", message_id="wamid.IN1"))
        wa.clock.now += WINDOW_S - 60
        result = await wa.send("hello", reply_to="wamid.IN1")
    assert result.structured_content["status"] == "sent"
    assert wa.fake.messages() == [
        {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": CONTACT,
            "type": "text",
            "text": {"body": "hello", "preview_url": False},
            "context": {"message_id": "wamid.IN1"},
        }
    ]


async def test_outside_the_window_without_a_template_the_reply_is_refused_clearly(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        wa.clock.now += WINDOW_S + 1
        late = await wa.send("hello again")
        never = await wa.send("hello stranger", chat_id="15559990000")
    for result, who in ((late, CONTACT), (never, "15559990000")):
        message = error_text(result)
        assert f"WhatsApp contact {who} last wrote more than 24 hours ago" in message
        assert "NEXO_WHATSAPP_NOTICE_TEMPLATE" in message
        assert "recorded as failed" in message
    assert wa.fake.messages() == []


async def test_outside_the_window_the_notice_template_carries_the_text(tmp_path: Path) -> None:
    async with running(tmp_path, notice_template="nexo_notice", notice_template_language="en") as wa:
        result = await wa.send("Your **report** is\nready.")
    assert result.structured_content["status"] == "sent"
    assert [m["template"] for m in wa.fake.messages()] == [
        {
            "name": "nexo_notice",
            "language": {"code": "en"},
            "components": [
                {"type": "body", "parameters": [{"type": "text", "text": "Your report is ready."}]}
            ],
        }
    ]


async def test_the_platforms_re_engagement_error_is_the_same_clear_refusal(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        wa.fake.fail_next(131047)
        result = await wa.send("hello")
    assert "outside the customer-service window" in error_text(result)


async def test_a_part_refused_for_its_parameters_is_resent_once_as_plain_text(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        wa.fake.fail_next(100)
        result = await wa.send("See **this** [page](https://example.org)")
        wa.fake.fail_next(100, 100)
        refused = await wa.send("twice **refused**")
    assert result.structured_content["status"] == "sent"
    assert [m["text"]["body"] for m in wa.fake.messages()] == ["See this page (https://example.org)"]
    assert "WhatsApp error 100" in error_text(refused)


@pytest.mark.parametrize("code", [130429, 131056, 80007])
async def test_rate_limits_are_waited_out_with_bounded_backoff(tmp_path: Path, code: int) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        wa.fake.fail_next(code, code)
        result = await wa.send("hello")
    assert result.structured_content["status"] == "sent"
    assert wa.sleeps == [1.0, 2.0]
    assert [m["text"]["body"] for m in wa.fake.messages()] == ["hello"]


async def test_a_platform_down_keeps_the_reply_queued_until_the_contact_writes_again(tmp_path: Path) -> None:
    async with running(tmp_path, max_retries=2, max_backoff_s=1.5) as wa:
        await wa.contact_writes()
        wa.fake.fail_next(503, 500, 131000)
        queued = await wa.send("hello", idempotency_key="q1")
        await wa.deliver(wa.fake.text(CONTACT, "are you there?"))
        await wa.fake.wait_for(lambda fake: len(fake.messages()) == 1)
    assert queued.structured_content["status"] == "queued"
    assert wa.sleeps == [1.0, 1.5]
    assert [m["text"]["body"] for m in wa.fake.messages()] == ["hello"]


async def test_an_undeliverable_recipient_fails_once_and_is_not_retried(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes()
        wa.fake.undeliverable.add(CONTACT)
        first = await wa.send("hello", idempotency_key="u1")
        again = await wa.send("hello", idempotency_key="u1")
    assert f"WhatsApp cannot deliver to {CONTACT}" in error_text(first)
    assert again.structured_content["status"] == "duplicate"
    assert again.structured_content["state"] == "failed"
    assert wa.sleeps == []


async def test_a_chat_id_that_is_not_a_wa_id_is_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        result = await wa.send("hello", chat_id="+1 555 123")
    assert "chat_id '+1 555 123' is not a WhatsApp wa_id" in error_text(result)


async def test_a_bad_access_token_stops_the_start_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(BaseException) as raised:  # noqa: PT011 -- the start fails inside task groups
        async with running(tmp_path, access_token="EAAexpired"):
            pass
    failure = startup_failure(raised.value)
    assert isinstance(failure, TokenRefused)
    assert str(failure).startswith("WhatsApp refused the access token or phone number id (WhatsApp error 190")
    assert "NEXO_WHATSAPP_ACCESS_TOKEN" in str(failure)
    assert "`nexo channel doctor`" in str(failure)
    assert "EAAexpired" not in str(failure)


async def test_a_reaction_opens_the_window_too(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        reaction = {"type": "reaction", "reaction": {"message_id": "wamid.X", "emoji": "👍"}}
        await wa.deliver(wa.fake.message(CONTACT, reaction))
        result = await wa.send("glad you liked it")
    assert result.structured_content["status"] == "sent"
    assert [m["text"]["body"] for m in wa.fake.messages()] == ["glad you liked it"]
