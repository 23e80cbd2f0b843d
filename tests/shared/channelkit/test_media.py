"""Files arriving with a message: saved into the workspace inbox safely, referenced in the content."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path

import pytest
from mcp import Client

from shared.channelkit import Attachment, TooLarge, define_channel, message_content, save_inbound_file
from shared.channelkit.media import safe_name
from tests.shared.test_channelkit_kit import KitSettings, Platform, build

pytestmark = pytest.mark.anyio
DAY = date(2026, 11, 26)


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_file_lands_in_the_days_inbox_private_and_referenced(tmp_path: Path) -> None:
    platform = Platform()
    async with Client(build(tmp_path, platform)):
        saved = await platform.live.save_inbound_file(
            "c1", "photo.jpg", chunks(b"\xff\xd8", b"x" * 49_000), mime="image/jpeg"
        )
    workspace = tmp_path / "workspace"
    file = workspace / "inbox" / "kittest" / "2023-11-14" / "photo.jpg"
    assert saved == Attachment("inbox/kittest/2023-11-14/photo.jpg", "image/jpeg", 49_002, "c1")
    assert saved.reference() == "[attachment: inbox/kittest/2023-11-14/photo.jpg (image/jpeg, 48 KB)]"
    assert file.read_bytes() == b"\xff\xd8" + b"x" * 49_000
    assert mode(file) == 0o600
    assert [mode(folder) for folder in (file.parent, file.parent.parent, file.parent.parent.parent)] == [
        0o700
    ] * 3


async def test_a_second_file_of_the_same_name_never_overwrites_the_first(tmp_path: Path) -> None:
    names = [
        (
            await save_inbound_file(
                tmp_path, "telegram", "c1", "photo.jpg", chunks(data), max_bytes=10, day=DAY
            )
        ).path
        for data in (b"one", b"two", b"three")
    ]
    folder = tmp_path / "inbox" / "telegram" / "2026-11-26"
    assert names == [
        "inbox/telegram/2026-11-26/photo.jpg",
        "inbox/telegram/2026-11-26/photo-2.jpg",
        "inbox/telegram/2026-11-26/photo-3.jpg",
    ]
    assert [(folder / name).read_bytes() for name in ("photo.jpg", "photo-2.jpg", "photo-3.jpg")] == [
        b"one",
        b"two",
        b"three",
    ]


@pytest.mark.parametrize(
    ("given", "mime", "safe"),
    [
        ("../../etc/passwd", "application/octet-stream", "passwd"),
        ("..\\..\\boot.ini", "text/plain", "boot.ini"),
        ("..", "image/png", "file.png"),
        (None, "audio/ogg", "file.oga"),
        (".bashrc", "text/plain", "bashrc.txt"),
        ("my report (final).pdf", "application/pdf", "my-report-final.pdf"),
        ("ｆｕｌｌ.txt", "text/plain", "full.txt"),
        ("Привет.jpg", "image/jpeg", "file.jpg"),
        ("a" * 300 + ".jpg", "image/jpeg", "a" * 76 + ".jpg"),
    ],
)
def test_a_platforms_file_name_is_never_trusted(given: str | None, mime: str, safe: str) -> None:
    assert safe_name(given, mime) == safe


async def test_a_file_over_the_limit_is_deleted_and_becomes_a_note(tmp_path: Path) -> None:
    with pytest.raises(TooLarge) as refused:
        await save_inbound_file(
            tmp_path, "telegram", "c1", "movie.mp4", chunks(b"x" * 600, b"x" * 600), max_bytes=1000, day=DAY
        )
    assert refused.value.note() == "[attachment not saved: movie.mp4 (video/mp4) is larger than 1000 bytes]"
    assert list((tmp_path / "inbox" / "telegram" / "2026-11-26").iterdir()) == []


async def test_a_download_that_breaks_leaves_no_partial_file(tmp_path: Path) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"half"
        raise ConnectionResetError("platform hung up")

    with pytest.raises(ConnectionResetError):
        await save_inbound_file(tmp_path, "telegram", "c1", "doc.pdf", broken(), max_bytes=1000, day=DAY)
    assert list((tmp_path / "inbox" / "telegram" / "2026-11-26").iterdir()) == []


async def test_an_inbox_that_is_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "inbox").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="is a symlink"):
        await save_inbound_file(workspace, "telegram", "c1", "x.txt", chunks(b"x"), max_bytes=10, day=DAY)
    assert list(elsewhere.iterdir()) == []


def test_the_content_is_the_caption_then_one_line_per_file_then_notes() -> None:
    photo = Attachment("inbox/telegram/2026-11-26/photo.jpg", "image/jpeg", 2_500_000, "c1")
    voice = Attachment("inbox/telegram/2026-11-26/voice.oga", "audio/ogg", 900, "c1")
    note = "[attachment not saved: movie.mp4 (video/mp4) is larger than 20.0 MB]"
    assert message_content("  Look at this  ", [photo, voice], [note]) == (
        "Look at this\n"
        "[attachment: inbox/telegram/2026-11-26/photo.jpg (image/jpeg, 2.4 MB)]\n"
        "[attachment: inbox/telegram/2026-11-26/voice.oga (audio/ogg, 900 bytes)]\n"
        f"{note}"
    )
    assert message_content(None, [voice]) == voice.reference()
    assert message_content("just text", []) == "just text"


async def test_a_channel_saves_no_more_than_its_file_cap(tmp_path: Path) -> None:
    platform = Platform()
    server = define_channel(
        "kittest",
        settings=KitSettings(state_dir=tmp_path, max_file_bytes=1000),
        receive=platform.receive,
        send=platform.send,
        max_file_bytes=10,
        instructions="test channel",
    )
    async with Client(server):
        with pytest.raises(TooLarge) as refused:
            await platform.live.save_inbound_file("c1", "a.txt", chunks(b"x" * 11), max_bytes=500)
    assert refused.value.max_bytes == 10
