"""Files from the workspace go out as photos or documents; "typing..." shows while a turn runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channel_servers.telegram.support import pull, telegram_channel
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.anyio

ANA = 5550001
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
