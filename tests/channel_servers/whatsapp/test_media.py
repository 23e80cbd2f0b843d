"""Media in: image, voice and document media ids looked up, downloaded with the token, saved in the
workspace under the size cap and referenced in the message with their MIME type; captions kept."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.channel_servers.whatsapp.conftest import CONTACT, ManualClock, running

pytestmark = pytest.mark.anyio

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(200))


DAY = datetime.fromtimestamp(ManualClock().now, UTC).date().isoformat()
"""The day the channel's clock says it is: the inbox folder of the files saved."""


def inbox(tmp_path: Path) -> Path:
    return tmp_path / "workspace" / "inbox" / "whatsapp" / DAY


async def test_an_image_is_saved_once_and_referenced_under_its_caption(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        media_id = wa.fake.add_media(JPEG, "image/jpeg")
        payload = wa.fake.media_message(CONTACT, "image", media_id, caption="our new logo")
        assert await wa.deliver(payload, times=3) == [200, 200, 200]
        events = await wa.pull()
    assert [e.payload["content"] for e in events] == [
        f"our new logo\n[attachment: inbox/whatsapp/{DAY}/image.jpg (image/jpeg, 204 bytes)]"
    ]
    saved = inbox(tmp_path) / "image.jpg"
    assert saved.read_bytes() == JPEG
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert sorted(p.name for p in inbox(tmp_path).iterdir()) == ["image.jpg"]
    assert wa.fake.lookups == 1


async def test_a_voice_note_and_a_document_keep_their_type_and_name(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        voice = wa.fake.add_media(b"OggS voice", "audio/ogg; codecs=opus")
        pdf = wa.fake.add_media(b"%PDF-1.7 report", "application/pdf")
        await wa.deliver(wa.fake.media_message(CONTACT, "audio", voice))
        await wa.deliver(wa.fake.media_message(CONTACT, "document", pdf, caption="Q3"))
        events = await wa.pull()
    assert [e.payload["content"] for e in events] == [
        f"[attachment: inbox/whatsapp/{DAY}/audio.oga (audio/ogg, 10 bytes)]",
        f"Q3\n[attachment: inbox/whatsapp/{DAY}/report.pdf (application/pdf, 15 bytes)]",
    ]
    assert (inbox(tmp_path) / "report.pdf").read_bytes() == b"%PDF-1.7 report"


async def test_media_over_the_cap_is_not_downloaded_and_the_message_says_so(tmp_path: Path) -> None:
    async with running(tmp_path, media_max_bytes=100) as wa:
        media_id = wa.fake.add_media(JPEG, "image/jpeg")
        await wa.deliver(wa.fake.media_message(CONTACT, "image", media_id, caption="big one"))
        events = await wa.pull()
    assert [e.payload["content"] for e in events] == [
        "big one\n[attachment not saved: image (image/jpeg) is larger than 100 bytes]"
    ]
    assert not inbox(tmp_path).exists()


async def test_media_that_cannot_be_fetched_still_delivers_the_message(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        media_id = wa.fake.add_media(JPEG, "image/jpeg")
        payload = wa.fake.media_message(CONTACT, "image", media_id, caption="look")
        del wa.fake.media[media_id]
        await wa.deliver(payload)
        events = await wa.pull()
    assert [e.payload["content"] for e in events] == [
        "look\n[attachment not saved: image (image/jpeg) could not be downloaded from WhatsApp]"
    ]
