"""Files attached to a mail, saved into the workspace inbox under the size cap (once per mail)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from email.message import EmailMessage

from shared.channelkit import Attachment, Channel, TooLarge


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def save_attachments(
    channel: Channel, chat_id: str, message: EmailMessage
) -> tuple[list[Attachment], list[str]]:
    """Each attachment saved (or, past ``max_file_bytes``, a note saying it was not)."""
    saved: list[Attachment] = []
    notes: list[str] = []
    for part in message.iter_attachments():
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        try:
            saved.append(
                await channel.save_inbound_file(
                    chat_id, part.get_filename(), _chunks(payload), mime=part.get_content_type()
                )
            )
        except TooLarge as exc:
            notes.append(exc.note())
    return saved, notes
