"""Files in and out of Slack.

In: a message's files are downloaded from ``url_private_download`` with the bot token, streamed
through the kit's ``save_inbound_file`` under the size cap into the agent's workspace; the token is
sent only to Slack's own hosts (``*.slack.com``, ``*.slack-gov.com`` or the configured API host),
so a forged URL cannot collect it. A file that is too large, or cannot be fetched, becomes a note.

Out: Slack's external upload: ``files.getUploadURLExternal`` (name and length), the bytes POSTed to
the URL it returns, then ``files.completeUploadExternal`` shares the file in the chat's thread with
the caption as its comment.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from channel_servers.slack.api import NetworkError, WebApi
from channel_servers.slack.events import Message
from channel_servers.slack.outbound import Sender
from shared.channelkit import Channel, SendFailed, Unreachable
from shared.channelkit.media import Attachment, TooLarge, message_content
from shared.channelkit.text import to_slack_mrkdwn

logger = logging.getLogger("nexo.slack")

SLACK_HOSTS = (".slack.com", ".slack-gov.com")


def slack_host(url: str, api_base_url: str) -> bool:
    """Whether ``url`` is one of Slack's file hosts (or the configured API's), over https there."""
    parts, api = urlsplit(url), urlsplit(api_base_url)
    host = (parts.hostname or "").lower()
    if parts.scheme == api.scheme and host == (api.hostname or "").lower() and parts.port == api.port:
        return True
    return parts.scheme == "https" and host.endswith(SLACK_HOSTS)


async def with_files(api: WebApi, api_base_url: str, channel: Channel, message: Message) -> str:
    """The message's content: its text, then a reference (or a note) per attached file."""
    attachments: list[Attachment] = []
    notes: list[str] = []
    for item in message.files:
        name = str(item.get("name") or "file")
        mime = str(item.get("mimetype") or "application/octet-stream")
        try:
            attachments.append(await _download(api, api_base_url, channel, message.chat_id, item, name, mime))
        except TooLarge as exc:
            notes.append(exc.note())
        except (NetworkError, httpx2.HTTPError) as exc:
            logger.warning("slack: file %s of message %s not downloaded: %s", name, message.dedupe_key, exc)
            notes.append(f"[attachment not saved: {name} ({mime}) could not be downloaded]")
    return message_content(message.text, attachments, notes)


async def _download(
    api: WebApi, api_base_url: str, channel: Channel, chat_id: str, item: dict[str, Any], name: str, mime: str
) -> Attachment:
    limit = channel.settings.max_file_bytes
    size = item.get("size")
    if isinstance(size, int) and size > limit:
        raise TooLarge(name, mime, limit)
    url = str(item.get("url_private_download") or item.get("url_private") or "")
    if not slack_host(url, api_base_url):
        raise NetworkError(
            f"the file's URL is not on a Slack host ({urlsplit(url).hostname or 'none'})", sent=False
        )

    async def chunks() -> AsyncIterator[bytes]:
        async with api.http.stream("GET", url, headers=api.authorization(), timeout=120.0) as response:
            if response.status_code != 200:
                raise NetworkError(f"the download answered HTTP {response.status_code}", sent=True)
            if response.headers.get("content-type", "").startswith("text/html") and "html" not in mime:
                raise NetworkError("Slack answered a sign-in page: add the files:read scope", sent=True)
            async for chunk in response.aiter_bytes():
                yield chunk

    return await channel.save_inbound_file(chat_id, name, chunks(), mime=mime)


async def send_file(
    sender: Sender, chat_id: str, path: Path, caption: str | None, reply_to: str | None
) -> str:
    """Upload a workspace file into the chat (its thread, if any); the platform id is Slack's file id."""
    channel_id, thread = await sender.target(chat_id, reply_to)
    content = await anyio.Path(path).read_bytes()
    upload = await sender.call_form(
        "files.getUploadURLExternal", {"filename": path.name, "length": len(content)}
    )
    try:
        response = await sender.api.http.post(str(upload["upload_url"]), content=content, timeout=120.0)
    except httpx2.ConnectError as exc:
        raise Unreachable(f"cannot reach Slack's upload URL: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise SendFailed(f"Slack's upload URL answered HTTP {response.status_code}")
    params: dict[str, Any] = {
        "files": json.dumps([{"id": upload["file_id"], "title": path.name}]),
        "channel_id": channel_id,
    }
    if thread is not None:
        params["thread_ts"] = thread
    if caption:
        params["initial_comment"] = to_slack_mrkdwn(caption)
    await sender.call_form("files.completeUploadExternal", params)
    return str(upload["file_id"])
