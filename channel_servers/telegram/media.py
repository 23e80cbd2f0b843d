"""Photos, voice notes and documents that arrive with a message, downloaded into the workspace.

``getFile`` names the file, the download streams it through the kit's ``save_inbound_file`` under
the size cap, and the message's content carries the caption and one reference line per file. A file
that is too large, or that Telegram will not hand out (its own cap is 20 MB), becomes a note in the
message instead, so the agent knows something was sent.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx2

from channel_servers.telegram.api import ApiError, BotApi, NetworkError
from channel_servers.telegram.updates import MediaRef, Message
from shared.channelkit import Channel
from shared.channelkit.media import Attachment, TooLarge, message_content

logger = logging.getLogger("nexo.telegram")


async def with_files(api: BotApi, channel: Channel, message: Message) -> str:
    """The message's content: its caption, then a reference (or a note) per attached file."""
    attachments: list[Attachment] = []
    notes: list[str] = []
    for media in message.media:
        try:
            attachments.append(await _download(api, channel, message.chat_id, media))
        except TooLarge as exc:
            notes.append(exc.note())
        except (ApiError, NetworkError, httpx2.HTTPError) as exc:
            logger.warning(
                "telegram: %s of message %s not downloaded: %s", media.kind, message.dedupe_key, exc
            )
            notes.append(
                f"[attachment not saved: {media.file_name} ({media.mime_type}) could not be downloaded]"
            )
    return message_content(message.content, attachments, notes)


async def _download(api: BotApi, channel: Channel, chat_id: str, media: MediaRef) -> Attachment:
    limit = channel.settings.max_file_bytes
    if media.size is not None and media.size > limit:
        raise TooLarge(media.file_name, media.mime_type, limit)
    try:
        found = await api.call_retrying("getFile", {"file_id": media.file_id})
    except ApiError as exc:
        if "too big" in exc.description:
            raise TooLarge(media.file_name, media.mime_type, min(limit, 20 * 1024 * 1024)) from None
        raise

    async def chunks() -> AsyncIterator[bytes]:
        async with api.http.stream("GET", api.file_url(found["file_path"]), timeout=120.0) as response:
            if response.status_code != 200:
                raise NetworkError(f"the download answered HTTP {response.status_code}", sent=True)
            async for chunk in response.aiter_bytes():
                yield chunk

    return await channel.save_inbound_file(chat_id, media.file_name, chunks(), mime=media.mime_type)
