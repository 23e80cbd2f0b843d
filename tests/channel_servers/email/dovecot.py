"""A real Dovecot (IMAP with STARTTLS, LMTP) for the email channel's tests, run without privileges.

Dovecot runs from a throwaway config: users from a passwd file, maildirs in a private directory,
a certificate from a throwaway CA (``certificates.py``) that clients may use with STARTTLS or not,
on loopback. As root, Dovecot refuses to run its login and mail processes as root, so they run as
``dovenull`` and ``nobody``; as any other user, everything runs as that user. This module needs
only the standard library and ``cryptography``, so it also runs on Debian's own Python, as
another user (``test_as_a_user.py``).
"""

from __future__ import annotations

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path

from tests.channel_servers.email.certificates import Certificates, make_certificates

DOVECOT = Path("/usr/sbin/dovecot")
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
ssl = yes
ssl_cert = <{root}/tls/server.pem
ssl_key = <{root}/tls/server.key
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
    """Plain IMAP, with STARTTLS offered (and a plain login still allowed, on loopback only)."""
    certificates: Certificates

    @property
    def lmtp_socket(self) -> str:
        return str(self.root / "run" / "lmtp")

    def deliver(self, raw: bytes, recipient: str, mail_from: str) -> None:
        with smtplib.LMTP(self.lmtp_socket) as lmtp:
            lmtp.sendmail(mail_from, [recipient], raw)

    def messages(self, user: str, folder: str = "INBOX") -> list[EmailMessage]:
        """The user's folder as an IMAP client sees it, oldest first."""
        client = imaplib.IMAP4("127.0.0.1", self.imap_port)
        try:
            client.login(user, PASSWORD)
            client.select(folder, readonly=True)
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
        (root / "tls").mkdir()
        certificates = make_certificates(root / "tls")
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
            yield Dovecot(root, port, certificates)
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
