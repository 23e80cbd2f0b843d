"""The agent's Sent folder: a copy of each reply, as mail clients keep, and the record a restart asks.

Every reply carries a Message-ID derived from its outbox entry's idempotency key, and is appended
here right after the SMTP server accepted it. After a crash, a reply whose send was interrupted is
looked up by that Message-ID: found means it went out; absent means it did not, unless the process
died in the moment between the server's acceptance and the append (see docs/channels/email.md).
"""

from __future__ import annotations

import email.policy
import logging
import ssl
from email.message import EmailMessage

import aioimaplib
import anyio

from channel_servers.email.imapconnect import ImapProblem, checked, open_imap, quietly_logout
from channel_servers.email.settings import EmailSettings
from shared.channelkit import Unreachable

logger = logging.getLogger("nexo.email")

_PROBLEMS = (TimeoutError, OSError, ImapProblem, aioimaplib.Abort, aioimaplib.CommandTimeout)


class SentFolder:
    """One IMAP connection of its own (the inbox's waits in IDLE), opened when first needed."""

    def __init__(self, settings: EmailSettings, tls: ssl.SSLContext) -> None:
        self.settings = settings
        self.tls = tls
        self._lock = anyio.Lock()
        self._client: aioimaplib.IMAP4 | None = None

    async def save(self, message: EmailMessage) -> bool:
        """Append a sent reply (flagged seen); False, with a warning, when the folder cannot take it:
        the reply went out all the same."""
        try:
            async with self._lock:
                client = await self._connection()
                await self._append(client, message)
        except _PROBLEMS as exc:
            await self._drop()
            logger.warning(
                "reply %s went out but could not be filed in %s: %s",
                message["Message-ID"],
                self.settings.sent_folder,
                exc,
            )
            return False
        return True

    async def holds(self, message_id: str) -> bool:
        """Whether a mail with this Message-ID (without angle brackets) is in the folder; raises
        Unreachable when the folder cannot be read now."""
        folder = self.settings.sent_folder
        try:
            async with self._lock:
                client = await self._connection()
                status = await client.select(folder)
                if status.result != "OK":
                    return False  # no Sent folder yet: nothing was ever filed in it
                found = checked(
                    await client.uid_search("HEADER", "Message-ID", f'"<{message_id}>"', charset=None),
                    "UID SEARCH",
                )
        except _PROBLEMS as exc:
            await self._drop()
            raise Unreachable(f"cannot read the folder {folder!r}: {exc}") from exc
        return any(word.isdigit() for line in found.lines[:-1] for word in bytes(line).split())

    async def close(self) -> None:
        async with self._lock:
            await self._drop()

    async def _connection(self) -> aioimaplib.IMAP4:
        if self._client is None or self._client.get_state() == "LOGOUT":
            self._client = await open_imap(self.settings, self.tls)
        return self._client

    async def _append(self, client: aioimaplib.IMAP4, message: EmailMessage) -> None:
        folder = self.settings.sent_folder
        raw = message.as_bytes(policy=email.policy.SMTP)
        appended = await client.append(raw, mailbox=folder, flags="(\\Seen)")
        if appended.result != "OK" and b"TRYCREATE" in b" ".join(bytes(line) for line in appended.lines):
            created = await client.create(folder)
            if created.result == "OK":
                await client.subscribe(folder)
            appended = await client.append(raw, mailbox=folder, flags="(\\Seen)")
        checked(appended, f"APPEND {folder}")

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await quietly_logout(client)
