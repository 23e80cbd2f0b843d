"""How the channel talks to its mail servers: one kept SMTP connection, IMAP over STARTTLS."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from channel_servers.email.imap import Inbox
from channel_servers.email.smtp import IDLE_CHECK_S, SmtpSender
from channel_servers.email.store import MailStore
from shared.db import Database
from shared.hosting.errors import HostingError
from tests.channel_servers.email.dovecot import Dovecot, free_port
from tests.channel_servers.email.mailserver import ReceivingMta
from tests.channel_servers.email.support import email_channel, mail, pull, settings_for, submit

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def note(to: str, text: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "agent8@nexo.test"
    message["To"] = to
    message["Subject"] = text
    message.set_content(text)
    return message


async def test_replies_share_one_smtp_connection_which_is_opened_again_after_the_server_dropped_it(
    tmp_path: Path, dovecot: Dovecot
) -> None:
    receiving = ReceivingMta(dovecot)
    port = free_port()
    settings = settings_for(tmp_path, dovecot, port, "agent8")
    clock = Clock()
    sender = SmtpSender(settings, settings.tls_context(), monotonic=clock)
    first = Controller(receiving, hostname="127.0.0.1", port=port)
    first.start()
    try:
        for n in range(3):
            await sender.send(note("ana@nexo.test", f"one connection {n}"))
    finally:
        first.stop()  # drops the kept connection
    again = Controller(receiving, hostname="127.0.0.1", port=port)
    again.start()
    try:
        clock.now += IDLE_CHECK_S  # unused long enough to be checked before it is trusted
        await sender.send(note("ana@nexo.test", "after the restart"))
        await sender.close()
    finally:
        again.stop()
    subjects = [str(message["Subject"]) for message in dovecot.messages("ana")]
    assert subjects[-4:] == [*(f"one connection {n}" for n in range(3)), "after the restart"]
    assert sender.connections == 2


async def test_imap_over_starttls_trusts_the_configured_ca_and_refuses_an_unknown_certificate(
    tmp_path: Path, dovecot: Dovecot, mta: tuple[ReceivingMta, int]
) -> None:
    _, port = mta
    to = "agent9@nexo.test"
    submit(
        port,
        mail("ana@example.org", to, "tls@example.org", "Hi", "over TLS"),
        mail_from="ana@example.org",
        to=to,
    )
    plain = settings_for(tmp_path, dovecot, port, "agent9")
    secured = plain.model_copy(update={"imap_security": "starttls", "ca_file": dovecot.certificates.ca_file})
    async with email_channel(secured) as client:
        events = await pull(client, 1)
    assert [event.payload["content"] for event in events] == ["Subject: Hi\n\nover TLS"]
    untrusted = plain.model_copy(update={"imap_security": "starttls"})
    async with Database.open(tmp_path / "untrusted.db") as db:
        inbox = Inbox(untrusted, untrusted.tls_context(), MailStore(db), handle=_never, after_round=_never)
        with pytest.raises(HostingError) as caught:
            await inbox.run(ready=lambda: None)
    assert "a certificate this machine does not trust" in str(caught.value)
    assert "set NEXO_EMAIL_CA_FILE" in str(caught.value)


async def _never(*_: object) -> None:
    raise AssertionError("nothing may be read over a connection that is not trusted")
