"""The SMTP side: one reply as a threaded mail (In-Reply-To, References, ``Re:`` subject), quoting nothing."""

from __future__ import annotations

import email.policy
import hashlib
import ssl
import time
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import formatdate, getaddresses

import aiosmtplib
import anyio

from channel_servers.email.settings import EmailSettings
from channel_servers.email.store import Parent
from shared.channelkit import SendFailed, Unreachable
from shared.channelkit.text import to_plain

SMTP_TIMEOUT_S = 60.0
IDLE_CHECK_S = 10.0
"""A kept connection unused this long is checked with NOOP before a send trusts it."""
MAX_REFERENCES = 20
"""RFC 5322 lets References grow without bound; keep the thread's root and the latest ids."""


def reply_subject(subject: str) -> str:
    subject = subject.strip() or "(no subject)"
    return subject if subject.lower().startswith("re:") else f"Re: {subject}"


def compose(settings: EmailSettings, parent: Parent, text: str, message_id: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = settings.address
    message["To"] = parent.sender
    message["Subject"] = reply_subject(parent.subject)
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = f"<{message_id}>"
    message["In-Reply-To"] = f"<{parent.message_id}>"
    chain = [*parent.references, parent.message_id]
    if len(chain) > MAX_REFERENCES:
        chain = [chain[0], *chain[-(MAX_REFERENCES - 1) :]]
    message["References"] = " ".join(f"<{ref}>" for ref in chain)
    # RFC 3834: other responders do not answer this one, so two agents never loop.
    message["Auto-Submitted"] = "auto-replied"
    message.set_content(to_plain(text))
    return message


def reply_message_id(idempotency_key: str, domain: str) -> str:
    """The Message-ID of the reply sent under ``idempotency_key`` (without angle brackets): the same
    for every attempt, so the Sent folder can tell whether an interrupted one went out."""
    return f"nexo.{hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]}@{domain}"


def recipients(message: EmailMessage) -> list[str]:
    return [address for _, address in getaddresses(message.get_all("To", [])) if address]


class SmtpSender:
    """One SMTP connection kept open across sends, one transaction at a time.

    A connection unused for ``IDLE_CHECK_S`` is checked with NOOP before it is trusted (servers
    drop idle clients), and any failure closes it, so the next send opens a new one. Until the
    end of DATA the server has accepted nothing, so a failure before it keeps the reply queued;
    a connection lost during DATA leaves the outcome unknown and the error goes through (the kit
    records the reply as uncertain and asks the Sent folder at the next start).
    """

    def __init__(
        self,
        settings: EmailSettings,
        tls: ssl.SSLContext,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.tls = tls
        self._monotonic = monotonic
        self._lock = anyio.Lock()
        self._client: aiosmtplib.SMTP | None = None
        self._used_at = 0.0
        self.connections = 0
        """How many connections were opened (each costs a handshake and a login)."""

    async def send(self, message: EmailMessage) -> None:
        async with self._lock:
            client = await self._connection()
            try:
                await self._transaction(client, message)
            except BaseException:
                self._drop()
                raise
            self._used_at = self._monotonic()

    async def close(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
            if client is not None and client.is_connected:
                try:
                    await client.quit()
                except (aiosmtplib.SMTPException, OSError):
                    client.close()

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    async def _connection(self) -> aiosmtplib.SMTP:
        client = self._client
        if client is not None and client.is_connected:
            if self._monotonic() - self._used_at < IDLE_CHECK_S:
                return client
            try:
                await client.noop()
                return client
            except (aiosmtplib.SMTPException, OSError):
                self._drop()
        settings = self.settings
        secure = settings.smtp_security != "none"
        client = aiosmtplib.SMTP(
            hostname=settings.smtp_host,
            port=settings.smtp_port,
            username=settings.login if secure else None,
            password=settings.password.get_secret_value() if secure else None,
            use_tls=settings.smtp_security == "tls",
            start_tls=settings.smtp_security == "starttls",
            tls_context=self.tls,
            timeout=SMTP_TIMEOUT_S,
        )
        try:
            await client.connect()
        except aiosmtplib.SMTPAuthenticationError as exc:
            client.close()
            raise Unreachable(
                f"the SMTP server refused the login ({exc.code}): "
                "check NEXO_EMAIL_USERNAME and NEXO_EMAIL_PASSWORD"
            ) from exc
        except (aiosmtplib.SMTPException, OSError) as exc:
            client.close()
            raise Unreachable(f"cannot reach the SMTP server {settings.smtp_host}: {exc}") from exc
        self._client = client
        self.connections += 1
        self._used_at = self._monotonic()
        return client

    async def _transaction(self, client: aiosmtplib.SMTP, message: EmailMessage) -> None:
        try:
            await client.mail(self.settings.address)
            for recipient in recipients(message):
                await client.rcpt(recipient)
        except (aiosmtplib.SMTPSenderRefused, aiosmtplib.SMTPRecipientRefused) as exc:
            raise _refused(exc) from exc
        except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError, OSError) as exc:
            raise Unreachable(f"the SMTP server {self.settings.smtp_host} went away: {exc}") from exc
        try:
            await client.data(message.as_bytes(policy=email.policy.SMTP))
        except aiosmtplib.SMTPDataError as exc:
            raise _refused(exc) from exc


def _refused(exc: aiosmtplib.SMTPResponseException) -> Exception:
    """A 4xx reply (try later) keeps the reply queued; a 5xx one fails it: nothing was accepted."""
    if 400 <= exc.code < 500:
        return Unreachable(f"the SMTP server deferred the mail: {exc}")
    return SendFailed(f"the SMTP server refused the mail: {exc}")
