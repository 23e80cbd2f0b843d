"""Files from the workspace go out as photos or documents; "typing..." shows while a turn runs."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from channel_servers.telegram.api import ApiError, BotApi
from tests.channel_servers.support import pull
from tests.channel_servers.telegram.support import telegram_channel
from tests.fakes.telegram_api import TOKEN, FakeTelegram

pytestmark = pytest.mark.anyio

ANA = 5550001
GROUP = -1001234567890
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


async def test_a_workspace_file_is_uploaded_as_a_photo_or_a_document(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "chart.png").write_bytes(PNG)
    (workspace / "report.csv").write_text("a,b\n1,2\n")
    fake = FakeTelegram()
    fake.chat(ANA)
    async with telegram_channel(tmp_path, fake, workspace_dir=workspace) as running:
        photo = await running.client.call_tool(
            "send_file", {"chat_id": str(ANA), "path": "chart.png", "caption": "the **chart**"}
        )
        document = await running.client.call_tool("send_file", {"chat_id": str(ANA), "path": "report.csv"})
    assert photo.structured_content is not None
    assert document.structured_content is not None
    assert (photo.structured_content["status"], document.structured_content["status"]) == ("sent", "sent")
    [photo_call] = fake.calls_of("sendPhoto")
    [document_call] = fake.calls_of("sendDocument")
    assert (photo_call["photo"], photo_call["caption"], photo_call["parse_mode"]) == (
        PNG,
        "the <b>chart</b>",
        "HTML",
    )
    assert document_call["document"] == b"a,b\n1,2\n"
    assert [sent.text for sent in fake.sent_to(ANA)] == ["the chart", ""]


async def test_typing_shows_from_a_message_until_the_answer_goes_out(tmp_path: Path) -> None:
    fake = FakeTelegram()
    async with telegram_channel(tmp_path, fake) as running:
        fake.inject(fake.message(ANA, "hello"))
        await pull(running.client)
        [shown] = await fake.called("sendChatAction")
        assert running.telegram.channel is not None
        typing = running.telegram.channel.typing
        assert typing is not None
        assert typing.showing == frozenset({str(ANA)})
        await running.client.call_tool("send_message", {"text": "hi", "chat_id": str(ANA)})
        still = typing.showing
    assert shown == {"chat_id": str(ANA), "action": "typing"}
    assert still == frozenset()


async def test_typing_in_a_forum_topic_shows_in_that_topic_until_its_answer_goes_out(tmp_path: Path) -> None:
    fake = FakeTelegram()
    fake.chat(GROUP, "supergroup", is_forum=True)
    async with telegram_channel(tmp_path, fake) as running:
        fake.inject(fake.message(ANA, "in topic 9", chat_id=GROUP, thread_id=9))
        fake.inject(fake.message(ANA, "in topic 7", chat_id=GROUP, thread_id=7))
        _, in_seven = await pull(running.client, count=2)
        shown = await fake.called("sendChatAction", 2)
        assert running.telegram.channel is not None
        typing = running.telegram.channel.typing
        assert typing is not None
        both = typing.showing
        # The thread id, as the instructions ask: topic 9's indicator stops, topic 7's goes on.
        await running.client.call_tool("send_message", {"text": "nine", "chat_id": f"{GROUP}:9"})
        after_nine = typing.showing
        # The plain chat quoting a message of topic 7: Telegram posts it in topic 7, which stops too.
        reply = {"text": "seven", "chat_id": str(GROUP), "reply_to": in_seven.payload["meta"]["message_id"]}
        await running.client.call_tool("send_message", reply)
        after_seven = typing.showing
    assert sorted(
        (call["chat_id"], call["action"], int(call["message_thread_id"])) for call in shown[:2]
    ) == [
        (str(GROUP), "typing", 7),
        (str(GROUP), "typing", 9),
    ]
    assert both == frozenset({f"{GROUP}:9", f"{GROUP}:7"})
    assert after_nine == frozenset({f"{GROUP}:7"})
    assert after_seven == frozenset()
    assert [(sent.thread_id, sent.text) for sent in fake.sent_to(GROUP)] == [(9, "nine"), (7, "seven")]


async def test_the_stand_in_refuses_a_chat_action_in_a_topic_of_a_chat_that_is_no_forum() -> None:
    fake = FakeTelegram()
    fake.chat(GROUP, "supergroup")
    async with fake.serve() as url, httpx2.AsyncClient() as http:
        api = BotApi(http, url, TOKEN)
        with pytest.raises(ApiError) as refused:
            await api.call("sendChatAction", {"chat_id": GROUP, "action": "typing", "message_thread_id": 9})
        assert await api.call("sendChatAction", {"chat_id": GROUP, "action": "typing"}) is True
    assert (refused.value.code, refused.value.description) == (400, "Bad Request: message thread not found")


async def test_photos_voice_notes_and_documents_are_saved_into_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    fake = FakeTelegram()
    async with telegram_channel(tmp_path, fake, workspace_dir=workspace, max_file_bytes=1000) as running:
        fake.inject(fake.photo(ANA, PNG * 4, caption="look"), times=2)
        fake.inject(fake.voice(ANA, b"OggS" + b"\x01" * 100))
        fake.inject(fake.document(ANA, b"x" * 5000, "big.pdf", "application/pdf", caption="too big"))
        events = await pull(running.client, count=3)
        downloads = len(fake.calls_of("getFile"))
    contents = [event.payload["content"] for event in events]
    photo, voice = sorted((workspace / "inbox" / "telegram").glob("*/*"))
    assert contents[0].splitlines()[0] == "look"
    assert contents[0].splitlines()[1].startswith("[attachment: inbox/telegram/")
    assert "(image/jpeg, " in contents[0]
    assert "(audio/ogg, 104 bytes)" in contents[1]
    assert (
        contents[2] == "too big\n[attachment not saved: big.pdf (application/pdf) is larger than 1000 bytes]"
    )
    assert photo.read_bytes() == PNG * 4  # the largest size of the photo
    assert voice.read_bytes() == b"OggS" + b"\x01" * 100
    assert downloads == 2  # the photo's second delivery is stored once and fetched once
