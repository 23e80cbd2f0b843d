"""A real mail system for the email channel's tests: Dovecot (IMAP, LMTP) and an aiosmtpd SMTP server.

Dovecot runs unprivileged from a throwaway config: users from a passwd file, maildirs in a private
directory, no TLS on loopback. As root, Dovecot refuses to run its login and mail processes as
root, so they run as ``dovenull`` and ``nobody``. The SMTP side plays the receiving MTA: it drops
any ``Authentication-Results`` claiming its own authserv-id (a sender could have forged it), adds
its own on top, and delivers over Dovecot's LMTP socket.
"""

from __future__ import annotations

import asyncio
import email.policy
import grp
import imaplib
import os
import pwd
import shutil
import smtplib
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parseaddr
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

DOVECOT = Path("/usr/sbin/dovecot")
AUTHSERV_ID = "mx.nexo.test"
PASSWORD = "mail-test-password"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _config(root: Path, port: int, users: list[str]) -> str:
    me = pwd.getpwuid(os.getuid()).pw_name
    as_root = os.getuid() == 0
    login_user = "dovenull" if as_root else me
    mail_uid = pwd.getpwnam("nobody").pw_uid if as_root else os.getuid()
    mail_gid = pwd.getpwnam("nobody").pw_gid if as_root else os.getgid()
    (root / "passwd").write_text("".join(f"{user}:{{PLAIN}}{PASSWORD}\n" for user in users))
    return f"""
protocols = imap lmtp
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_login_user = {login_user}
default_internal_user = {me}
default_internal_group = {grp.getgrgid(os.getgid()).gr_name}
first_valid_uid = 1
mail_location = maildir:{root}/mail/%n
mail_uid = {mail_uid}
mail_gid = {mail_gid}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%n {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_uid} gid={mail_gid} home={root}/mail/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service lmtp {{
  unix_listener lmtp {{
    mode = 0666
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


@dataclass
class Dovecot:
    root: Path
    imap_port: int

    @property
    def lmtp_socket(self) -> str:
        return str(self.root / "run" / "lmtp")

    def deliver(self, raw: bytes, recipient: str, mail_from: str) -> None:
        with smtplib.LMTP(self.lmtp_socket) as lmtp:
            lmtp.sendmail(mail_from, [recipient], raw)

    def messages(self, user: str) -> list[EmailMessage]:
        """The user's mailbox as an IMAP client sees it, oldest first."""
        client = imaplib.IMAP4("127.0.0.1", self.imap_port)
        try:
            client.login(user, PASSWORD)
            client.select("INBOX", readonly=True)
            _, data = client.uid("SEARCH", "ALL")
            found: list[EmailMessage] = []
            for uid in data[0].split():
                _, parts = client.uid("FETCH", uid, "(BODY.PEEK[])")
                raw = parts[0][1] if isinstance(parts[0], tuple) else b""
                message = BytesParser(policy=email.policy.default).parsebytes(raw)
                assert isinstance(message, EmailMessage)
                found.append(message)
            return found
        finally:
            client.logout()

    def flags(self, user: str) -> list[str]:
        client = imaplib.IMAP4("127.0.0.1", self.imap_port)
        try:
            client.login(user, PASSWORD)
            client.select("INBOX", readonly=True)
            _, data = client.uid("FETCH", "1:*", "(FLAGS)")
            return [line.decode() for line in data if isinstance(line, bytes)]
        finally:
            client.logout()


@contextmanager
def running_dovecot(users: list[str]) -> Iterator[Dovecot]:
    # Not under pytest's tmp_path: as root the mail processes run as nobody, who cannot enter it.
    root = Path(tempfile.mkdtemp(prefix="nexo-dovecot-"))
    try:
        root.chmod(0o755)
        (root / "mail").mkdir()
        if os.getuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(root / "mail", nobody.pw_uid, nobody.pw_gid)
        port = free_port()
        config = root / "dovecot.conf"
        config.write_text(_config(root, port, users))
        # Without -F, dovecot returns once its listeners are bound: no waiting for the port.
        with (root / "start.log").open("wb") as log:
            started = subprocess.run(
                [str(DOVECOT), "-c", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                timeout=30,
            )
        if started.returncode != 0:
            raise RuntimeError(f"dovecot did not start: {(root / 'start.log').read_text()}")
        try:
            yield Dovecot(root, port)
        finally:
            subprocess.run(
                [str(DOVECOT), "-c", str(config), "stop"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
                timeout=30,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
