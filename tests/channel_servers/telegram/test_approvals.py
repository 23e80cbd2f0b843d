"""Permission prompts as Approve / Deny buttons in the operator's chat; a press is the presser's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
)
from tests.channel_servers.support import ask, pull
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.anyio

OPERATOR = 5550001
STRANGER = 5550009


async def test_a_prompt_shows_buttons_and_each_press_is_its_pressers_answer(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(OPERATOR)
    async with telegram_channel(tmp_path, fake, approval_chat_ids=[str(OPERATOR)]) as running:
        delivered = await ask(running.client)
        [shown] = fake.sent_to(OPERATOR)
        fake.inject(fake.press(STRANGER, shown, "nexo:allow:kmpqr"))
        fake.inject(fake.press(OPERATOR, shown, "nexo:deny:kmpqr"), times=2)
        events = await pull(running.client, count=2)
        answered = await fake.called("answerCallbackQuery", 3)
    assert delivered == 1
    assert shown.text.startswith("Approve workspace__write_file?\nWrite a file <notes.md> & more")
    assert shown.reply_markup == {
        "inline_keyboard": [
            [
                {"text": "Approve", "callback_data": "nexo:allow:kmpqr"},
                {"text": "Deny", "callback_data": "nexo:deny:kmpqr"},
            ]
        ]
    }
    assert [(event.kind, event.payload) for event in events] == [
        (
            "permission_verdict",
            {
                "request_id": "kmpqr",
                "behavior": "allow",
                "sender": str(STRANGER),
                "chat_id": str(OPERATOR),
                "sender_name": "Presser",
            },
        ),
        (
            "permission_verdict",
            {
                "request_id": "kmpqr",
                "behavior": "deny",
                "sender": str(OPERATOR),
                "chat_id": str(OPERATOR),
                "sender_name": "Presser",
            },
        ),
    ]
    assert all("text" not in params for params in answered)


async def test_a_press_on_a_closed_or_foreign_button_only_stops_the_spinner(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(OPERATOR)
    async with telegram_channel(tmp_path, fake, approval_chat_ids=[str(OPERATOR)]) as running:
        await ask(running.client)
        [shown] = fake.sent_to(OPERATOR)
        fake.inject(fake.press(OPERATOR, shown, "nexo:allow:zzzzz"))
        fake.inject(fake.press(OPERATOR, shown, "other:thing"))
        answered = await fake.called("answerCallbackQuery", 2)
        stored = await pull(running.client, count=0)
    assert [params.get("text") for params in answered] == [
        "This request is already closed.",
        "This button is not nexo's.",
    ]
    assert stored == []


async def test_without_approval_chats_a_prompt_reaches_nobody(tmp_path: Path) -> None:
    async with telegram_channel(tmp_path) as running:
        delivered = await ask(running.client)
    assert delivered == 0
    assert running.fake.calls_of("sendMessage") == []


async def test_a_settled_prompt_is_edited_to_its_outcome_and_loses_its_buttons(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(OPERATOR)
    async with telegram_channel(tmp_path, fake, approval_chat_ids=[str(OPERATOR)]) as running:
        await ask(running.client)
        closed = await running.client.session.send_request(
            PermissionClosedCall(
                params=PermissionClosedParams(
                    request_id="kmpqr", outcome="allowed", decided_by="telegram:5550001 (Ana)"
                )
            ),
            PermissionClosedResult,
        )
        [edit] = await fake.called("editMessageText")
    [shown] = fake.sent_to(OPERATOR)
    assert closed.closed
    assert edit["message_id"] == shown.message_id
    assert shown.text == "Request kmpqr: approved by telegram:5550001 (Ana)."
    assert shown.reply_markup is None
