"""Files that arrive with a message, saved into the agent's workspace where its tools can open them.

``<workspace>/inbox/<channel>/<YYYY-MM-DD>/<name>``: the name is the platform's, sanitized (no path
from a platform is trusted) and made unique (nothing is overwritten); files are 0600, the folders
the kit creates 0700. The message then carries a reference line per file, e.g.
``[attachment: inbox/telegram/2026-11-26/photo-3.jpg (image/jpeg, 48 KB)]``, after its caption.
"""

from __future__ import annotations

import mimetypes
import os
import re
import unicodedata
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import BinaryIO, Final

import anyio

from shared.channelkit.files import DEFAULT_MIME

INBOX: Final = "inbox"
MAX_NAME: Final = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True, slots=True)
class Attachment:
    path: str
    """Relative to the workspace, as the workspace tools name it."""
    mime: str
    size: int
    chat_id: str
    """The chat it came from."""

    def reference(self) -> str:
        return f"[attachment: {self.path} ({self.mime}, {human_size(self.size)})]"


class TooLarge(Exception):
    """The file is larger than the channel saves: nothing was kept."""

    def __init__(self, file_name: str, mime: str, max_bytes: int) -> None:
        super().__init__(f"{file_name} is larger than {human_size(max_bytes)}")
        self.file_name = file_name
        self.mime = mime
        self.max_bytes = max_bytes

    def note(self) -> str:
        """The line the message carries instead of the file."""
        limit = human_size(self.max_bytes)
        return f"[attachment not saved: {self.file_name} ({self.mime}) is larger than {limit}]"


def safe_name(file_name: str | None, mime: str) -> str:
    """A file name with no path, no leading dot and only ``[A-Za-z0-9._-]``, kept short."""
    base = re.split(r"[/\\]", unicodedata.normalize("NFKC", file_name or ""))[-1].lstrip(".")
    stem, dot, suffix = base.rpartition(".")
    if not dot:
        stem, suffix = base, ""
    suffix = _UNSAFE.sub("", suffix)[:10]
    if not suffix and mime != DEFAULT_MIME and (guessed := mimetypes.guess_extension(mime)):
        suffix = guessed.lstrip(".")
    stem = _UNSAFE.sub("-", stem).strip("-.") or "file"
    stem = stem[: MAX_NAME - len(suffix) - 1]
    return f"{stem}.{suffix}" if suffix else stem


def _folder(workspace: Path, channel: str, day: date) -> tuple[Path, Path]:
    """(the workspace, the day's inbox folder in it), creating what is missing; never via a symlink."""
    root = workspace.expanduser().resolve()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)  # the workspace server may not have run yet
    folder = root
    for part in (INBOX, channel, day.isoformat()):
        folder = folder / part
        if folder.is_symlink():
            # The agent can write in its workspace: a planted link must not send files elsewhere.
            raise ValueError(f"{folder} is a symlink; the inbox must be a real folder: remove the link")
        folder.mkdir(mode=0o700, exist_ok=True)
    return root, folder


def _create(folder: Path, name: str) -> tuple[Path, BinaryIO]:
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    for number in range(1, 10_000):
        candidate = name if number == 1 else f"{stem}-{number}{dot}{suffix}"
        path = folder / candidate
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        return path, os.fdopen(descriptor, "wb")
    raise FileExistsError(f"no free name for {name} in {folder}")


async def save_inbound_file(
    workspace: Path,
    channel: str,
    chat_id: str,
    file_name: str | None,
    chunks: AsyncIterator[bytes],
    *,
    max_bytes: int,
    mime: str | None = None,
    day: date | None = None,
) -> Attachment:
    """Stream a platform's file into the inbox; raises :class:`TooLarge` (nothing kept) past ``max_bytes``.

    ``mime`` is the platform's type, else guessed from the name; ``day`` defaults to today (UTC).
    """
    day = day or datetime.now(UTC).date()
    kind = mime or mimetypes.guess_type(file_name or "")[0] or DEFAULT_MIME
    name = safe_name(file_name, kind)
    root, folder = await anyio.to_thread.run_sync(_folder, workspace, channel, day)
    path, raw = await anyio.to_thread.run_sync(_create, folder, name)
    size = 0
    try:
        async with anyio.wrap_file(raw) as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge(file_name or name, kind, max_bytes)
                await out.write(chunk)
    except BaseException:
        await anyio.Path(path).unlink(missing_ok=True)
        raise
    return Attachment(path.relative_to(root).as_posix(), kind, size, chat_id)


def message_content(caption: str | None, attachments: Sequence[Attachment], notes: Sequence[str] = ()) -> str:
    """A message's content on every platform: the caption, then one line per file (or note)."""
    lines = [caption.strip()] if caption and caption.strip() else []
    lines += [attachment.reference() for attachment in attachments]
    lines += list(notes)
    return "\n".join(lines)
