"""The email channel: IMAP in, SMTP out, one session per thread, built on the channel kit.

A mail reaches the model only when it may be answered (no auto-reply, bounce or list mail) and,
with ``authentication: dmarc``, only when the receiving server vouches for its From address. The
chat id is the thread (its first Message-ID); a reply answers the thread's mail it names, else the
latest one.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server import MCPServer

from channel_servers.email.approvals import answer_in, show
from channel_servers.email.attachments import save_attachments
from channel_servers.email.authentication import authenticated
from channel_servers.email.imap import Inbox
from channel_servers.email.mail import Mail, body_text, not_for_an_answer, parse
from channel_servers.email.sent import SentFolder
from channel_servers.email.settings import NAME, EmailSettings, load_settings
from channel_servers.email.smtp import SmtpSender, compose, reply_message_id
from channel_servers.email.store import MailStore, Parent
from shared.channelkit import Channel, SendFailed, channel_main, define_channel, message_content
from shared.channelkit.outbox import OutboxEntry
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.email")
CLOSE_TIMEOUT_S = 5.0


class Email:
    def __init__(self, settings: EmailSettings) -> None:
        self.settings = settings
        self.domain = settings.address.rpartition("@")[2]
        self.tls = settings.tls_context()
        self.smtp = SmtpSender(settings, self.tls)
        self.sent = SentFolder(settings, self.tls)
        self.channel: Channel | None = None
        self.store: MailStore | None = None

    async def receive(self, channel: Channel) -> None:
        self.channel = channel
        self.store = MailStore(channel.db)
        await self.store.create()
        inbox = Inbox(self.settings, self.tls, self.store, self.handle, channel.flush_all)
        try:
            await inbox.run(channel.ready)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
                await self.smtp.close()
                await self.sent.close()

    def _refusal(self, mail: Mail) -> str | None:
        reason = not_for_an_answer(mail, self.settings.address)
        if reason is not None:
            return reason
        if self.settings.authentication == "dmarc":
            assert self.settings.trusted_authserv_id is not None
            if not authenticated(mail.message, self.settings.trusted_authserv_id):
                return f"From {mail.sender} is not authenticated by {self.settings.trusted_authserv_id}"
        return None

    async def handle(self, raw: bytes) -> None:
        assert self.channel is not None
        assert self.store is not None
        mail = parse(raw)
        refusal = self._refusal(mail)
        if refusal is not None:
            logger.info("mail %s not passed on: %s", mail.message_id, refusal)
            return
        await self.store.remember(
            Parent(mail.message_id, mail.sender, mail.subject, mail.references),
            mail.thread,
            received_at=await self._next_order(),
        )
        text = body_text(mail)
        dedupe_key = f"message-id:{mail.message_id}"
        files: list[str] = []
        if not await self.channel.stored(dedupe_key):
            saved, notes = await save_attachments(self.channel, mail.thread, mail.message)
            files = [message_content(None, saved, notes)] if saved or notes else []
        # Only an approver's first line may read as "yes <id>": other mail starts with its subject.
        parts = [f"Subject: {mail.subject or '(none)'}", text, *files]
        content = answer_in(text, mail.sender, self.settings) or "\n\n".join(part for part in parts if part)
        meta = {
            "chat_id": mail.thread,
            "message_id": mail.message_id,
            "user_id": mail.sender,
            "user": mail.sender_name or mail.sender,
        }
        received = await self.channel.inbound(content, meta, dedupe_key)
        if received.new:
            await self.channel.flush(mail.thread)

    async def _next_order(self) -> int:
        assert self.store is not None
        row = await self.store.db.fetchone("SELECT COALESCE(MAX(received_at), 0) + 1 FROM email_messages")
        return int(row[0]) if row else 1

    async def prompt(self, params: PermissionRequestParams) -> int:
        return await show(self.settings, self.smtp, params)

    async def send(self, chat_id: str, text: str, reply_to: str | None, idempotency_key: str) -> str:
        assert self.store is not None, "send before the channel started"
        parent = await self.store.parent(chat_id, reply_to)
        if parent is None:
            raise SendFailed(
                f"no mail of thread {chat_id!r} was received: an email reply answers a received mail"
            )
        message_id = reply_message_id(idempotency_key, self.domain)
        message = compose(self.settings, parent, text, message_id)
        await self.smtp.send(message)
        await self.sent.save(message)
        return message_id

    async def was_delivered(self, entry: OutboxEntry) -> str | None:
        """A reply whose send was interrupted went out if the Sent folder holds its Message-ID."""
        message_id = reply_message_id(entry.idempotency_key, self.domain)
        return message_id if await self.sent.holds(message_id) else None


def build_server(settings: EmailSettings, mail: Email | None = None) -> MCPServer[Any]:
    mail = mail or Email(settings)
    return define_channel(
        NAME,
        settings=settings,
        receive=mail.receive,
        send_keyed=mail.send,
        was_delivered=mail.was_delivered,
        prompt=mail.prompt,
        wait_until_ready=True,
        instructions=(
            f'Email arrives as <channel source="{NAME}" chat_id="..." message_id="..." user_id="...">: '
            "chat_id is the mail thread, user_id the sender's authenticated address. Answer with the "
            "send_message tool, passing chat_id and message_id as reply_to; the reply is a plain-text "
            "mail in the same thread."
        ),
    )


def main() -> int:
    return channel_main(f"channel_servers.{NAME}", lambda: build_server(load_settings()))
