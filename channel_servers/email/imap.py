"""The IMAP side: read new mail in order of UID, hand each to the channel, mark it seen once stored.

The cursor is the folder's UIDVALIDITY and the last UID handled, kept in the channel's database.
A mail is flagged ``\\Seen`` and the cursor moved past it only after ``handle`` returned, so a crash
in between reads it again and the kit's dedupe on Message-ID drops the copy. New mail is awaited
with IDLE when the server offers it, else by polling every ``poll_interval_s``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Awaitable, Callable

import aioimaplib
import anyio

from channel_servers.email.imapconnect import ImapProblem, checked, open_imap, quietly_logout
from channel_servers.email.settings import EmailSettings
from channel_servers.email.store import MailStore
from shared.hosting.errors import HostingError

logger = logging.getLogger("nexo.email")

Handle = Callable[[bytes], Awaitable[None]]
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_FETCHED_UID = re.compile(rb"\(.*\bUID (\d+)")
IDLE_RENEW_S = 29 * 60
"""RFC 2177: a client renews IDLE at least every 29 minutes."""


class Inbox:
    def __init__(
        self,
        settings: EmailSettings,
        tls: ssl.SSLContext,
        store: MailStore,
        handle: Handle,
        after_round: Callable[[], Awaitable[object]],
    ) -> None:
        self.settings = settings
        self.tls = tls
        self.store = store
        self.handle = handle
        self.after_round = after_round
        """Runs after each look at the folder: replies queued while SMTP was down go out then."""
        self.uidvalidity = 0

    async def _connect(self) -> aioimaplib.IMAP4:
        settings = self.settings
        client = await open_imap(settings, self.tls)
        try:
            selected = checked(await client.select(settings.folder), f"SELECT {settings.folder}")
            for line in selected.lines:
                found = _UIDVALIDITY.search(bytes(line))
                if found:
                    self.uidvalidity = int(found.group(1))
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await quietly_logout(client)
            raise
        return client

    async def run(self, ready: Callable[[], None]) -> None:
        """Read mail until cancelled; connection failures reconnect after ``reconnect_s``."""
        first = True
        while True:
            try:
                client = await self._connect()
            except (TimeoutError, OSError, ImapProblem, aioimaplib.Abort) as exc:
                if first:
                    raise HostingError(_unreachable(self.settings, exc)) from None
                logger.warning(
                    "IMAP connection failed (%s); retrying in %.0f s", exc, self.settings.reconnect_s
                )
                await anyio.sleep(self.settings.reconnect_s)
                continue
            if first:
                ready()
                first = False
            try:
                await self._follow(client)
            except (TimeoutError, OSError, ImapProblem, aioimaplib.Abort) as exc:
                logger.warning(
                    "IMAP connection lost (%s); reconnecting in %.0f s", exc, self.settings.reconnect_s
                )
                await anyio.sleep(self.settings.reconnect_s)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await quietly_logout(client)

    async def _follow(self, client: aioimaplib.IMAP4) -> None:
        idle = client.has_capability("IDLE")
        while True:
            await self.read_new(client)
            await self.after_round()
            if idle:
                waiting = await client.idle_start(
                    timeout=min(IDLE_RENEW_S, self.settings.poll_interval_s * 30)
                )
                await client.wait_server_push(timeout=min(IDLE_RENEW_S, self.settings.poll_interval_s * 30))
                client.idle_done()
                checked(await asyncio.wait_for(waiting, 30), "IDLE")
            else:
                await anyio.sleep(self.settings.poll_interval_s)

    async def read_new(self, client: aioimaplib.IMAP4) -> int:
        """Hand every mail past the cursor to ``handle``, oldest first; returns how many."""
        folder = self.settings.folder
        last = await self.store.cursor(folder, self.uidvalidity)
        found = checked(await client.uid_search(f"UID {last + 1}:*"), "UID SEARCH")
        uids = sorted(
            int(word) for line in found.lines[:-1] for word in bytes(line).split() if word.isdigit()
        )
        handled = 0
        for uid in (uid for uid in uids if uid > last):
            fetched = checked(await client.uid("fetch", str(uid), "(UID BODY.PEEK[])"), "UID FETCH")
            raw = next((bytes(line) for line in fetched.lines if isinstance(line, bytearray)), None)
            if raw is None:
                continue  # expunged meanwhile
            await self.handle(raw)
            checked(await client.uid("store", str(uid), "+FLAGS.SILENT (\\Seen)"), "UID STORE")
            await self.store.advance(folder, self.uidvalidity, uid)
            handled += 1
        return handled


def _unreachable(settings: EmailSettings, exc: BaseException) -> str:
    where = f"the IMAP server {settings.imap_host}:{settings.imap_port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"{where} showed a certificate this machine does not trust ({exc.verify_message}): set "
            "NEXO_EMAIL_CA_FILE to the PEM file of the authority that signed it"
        )
    return (
        f"cannot reach {where}: {exc}; check NEXO_EMAIL_IMAP_HOST, NEXO_EMAIL_IMAP_PORT and "
        "NEXO_EMAIL_IMAP_SECURITY"
    )
