"""The receiving MTA of the email channel's tests: an aiosmtpd SMTP server delivering into Dovecot.

It plays the server mail for the agent and its contacts goes through: it drops any
``Authentication-Results`` claiming its own authserv-id (a sender could have forged it), adds its
own on top, and delivers over Dovecot's LMTP socket (``dovecot.py``).
"""

from __future__ import annotations

import asyncio
import email.policy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.utils import parseaddr

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.channel_servers.email.dovecot import Dovecot, free_port

AUTHSERV_ID = "mx.nexo.test"


@dataclass
class ReceivingMta:
    """The SMTP server mail for the agent and its contacts goes through."""

    dovecot: Dovecot
    signed: set[str] = field(default_factory=set)
    """Envelope senders whose mail passes DMARC here for their own domain (it signs their mail)."""
    delivered: list[tuple[str, bytes]] = field(default_factory=list)
    """(recipient, mail) in the order they were delivered."""
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_delivered(self, count: int, timeout: float) -> int:
        """Until at least ``count`` mails were delivered (or ``timeout``); returns how many were."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.delivered) >= count, timeout=timeout)
            return len(self.delivered)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:  # noqa: N802
        raw = envelope.original_content or b""
        message = BytesParser(policy=email.policy.compat32).parsebytes(raw)
        claims = message.get_all("Authentication-Results") or []
        del message["Authentication-Results"]
        for claim in claims:
            if not str(claim).strip().lower().startswith(AUTHSERV_ID):
                message["Authentication-Results"] = claim
        author = parseaddr(str(message.get("From", "")))[1].lower()
        domain = author.rpartition("@")[2]
        # Stands in for DKIM and SPF checks: only the senders' own servers submit from SIGNED.
        envelope_from = (envelope.mail_from or "").lower()
        if envelope_from in self.signed and envelope_from.rpartition("@")[2] == domain:
            verdict = f"dkim=pass header.d={domain}; dmarc=pass header.from={domain}"
        else:
            verdict = f"dkim=none; dmarc=fail header.from={domain}"
        stamped = f"Authentication-Results: {AUTHSERV_ID}; {verdict}\r\n".encode() + message.as_bytes()
        for recipient in envelope.rcpt_tos:
            # In a worker thread, as a real MTA queues: one slow delivery does not hold up other sessions.
            await asyncio.to_thread(
                self.dovecot.deliver, stamped, recipient.partition("@")[0], envelope.mail_from or ""
            )
            with self._changed:
                self.delivered.append((recipient, stamped))
                self._changed.notify_all()
        return "250 delivered"


@contextmanager
def running_mta(mta: ReceivingMta) -> Iterator[int]:
    port = free_port()
    controller = Controller(mta, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()
