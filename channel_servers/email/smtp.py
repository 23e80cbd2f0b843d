"""The SMTP side: one reply as a threaded mail (In-Reply-To, References, ``Re:`` subject), quoting nothing."""

from __future__ import annotations

import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import aiosmtplib

from channel_servers.email.settings import EmailSettings
from channel_servers.email.store import Parent
from shared.channelkit import SendFailed, Unreachable
from shared.channelkit.text import to_plain

MAX_REFERENCES = 20
"""RFC 5322 lets References grow without bound; keep the thread's root and the latest ids."""


def reply_subject(subject: str) -> str:
    subject = subject.strip() or "(no subject)"
    return subject if subject.lower().startswith("re:") else f"Re: {subject}"


def compose(settings: EmailSettings, parent: Parent, text: str) -> EmailMessage:
    message = EmailMessage()
    domain = settings.address.rpartition("@")[2]
    message["From"] = settings.address
    message["To"] = parent.sender
    message["Subject"] = reply_subject(parent.subject)
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=domain)
    message["In-Reply-To"] = f"<{parent.message_id}>"
    chain = [*parent.references, parent.message_id]
    if len(chain) > MAX_REFERENCES:
        chain = [chain[0], *chain[-(MAX_REFERENCES - 1) :]]
    message["References"] = " ".join(f"<{ref}>" for ref in chain)
    # RFC 3834: other responders do not answer this one, so two agents never loop.
    message["Auto-Submitted"] = "auto-replied"
    message.set_content(to_plain(text))
    return message


async def deliver(settings: EmailSettings, message: EmailMessage) -> None:
    """Send over SMTP; a refused connection keeps the reply queued, a refused recipient fails it."""
    context = ssl.create_default_context()
    try:
        await aiosmtplib.send(
            message,
            hostname=settings.smtp_host,
            port=settings.smtp_port,
            username=settings.login if settings.smtp_security != "none" else None,
            password=settings.password.get_secret_value() if settings.smtp_security != "none" else None,
            use_tls=settings.smtp_security == "tls",
            start_tls=settings.smtp_security == "starttls",
            tls_context=context,
            timeout=60,
        )
    except (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPConnectTimeoutError, ConnectionRefusedError) as exc:
        raise Unreachable(f"cannot reach the SMTP server {settings.smtp_host}: {exc}") from exc
    except aiosmtplib.SMTPAuthenticationError as exc:
        raise Unreachable(
            f"the SMTP server refused the login ({exc.code}): "
            "check NEXO_EMAIL_USERNAME and NEXO_EMAIL_PASSWORD"
        ) from exc
    except (aiosmtplib.SMTPRecipientsRefused, aiosmtplib.SMTPSenderRefused) as exc:
        raise SendFailed(f"the SMTP server refused the mail: {exc}") from exc
