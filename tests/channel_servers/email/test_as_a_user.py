"""The mail server fixture as an ordinary user runs the suite: Dovecot started, mail in and out.

The suite usually runs as root, where the fixture hands Dovecot's login and mail processes to
``dovenull`` and ``nobody``; as any other user they all run as that user, a different config path
that only a run as another user proves. ``dovecot.py`` needs only the standard library and
``cryptography``, so it runs here on Debian's own Python (the developer's virtualenv may sit
where other users cannot read it), as ``nobody``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mesh.harness import REPO

pytestmark = [
    pytest.mark.scenario,
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root (CI runs as root)"),
]

SYSTEM_PYTHON = "/usr/bin/python3"
NOBODY = 65534
FILES = (
    "tests/__init__.py",
    "tests/channel_servers/__init__.py",
    "tests/channel_servers/email/__init__.py",
    "tests/channel_servers/email/dovecot.py",
    "tests/channel_servers/email/certificates.py",
)
AS_A_USER = """
import imaplib, os, ssl
from tests.channel_servers.email.dovecot import PASSWORD, running_dovecot

with running_dovecot(["ana"]) as dovecot:
    hello = b"From: bob@example.org\\r\\nSubject: hello\\r\\n\\r\\nhi\\r\\n"
    dovecot.deliver(hello, "ana", "bob@example.org")
    client = imaplib.IMAP4("127.0.0.1", dovecot.imap_port)
    client.starttls(ssl.create_default_context(cafile=str(dovecot.certificates.ca_file)))
    client.login("ana", PASSWORD)
    client.select("INBOX", readonly=True)
    subjects = [str(message["Subject"]) for message in dovecot.messages("ana")]
    client.logout()
    print(os.getuid(), subjects)
"""


@pytest.fixture
def readable_copy() -> Iterator[Path]:
    """The fixture's modules where every user can read them (not under root's home or tmp_path)."""
    root = Path(tempfile.mkdtemp(prefix="nexo-mail-as-a-user-"))
    try:
        root.chmod(0o755)
        for name in FILES:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
            (root / name).chmod(0o644)
        for directory in (
            root / "tests",
            root / "tests" / "channel_servers",
            root / "tests/channel_servers/email",
        ):
            directory.chmod(0o755)
        yield root
    finally:
        shutil.rmtree(root)


def test_the_mail_server_fixture_runs_as_an_ordinary_user(readable_copy: Path) -> None:
    switch = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i"]
    variables = ["PATH=/usr/sbin:/usr/bin:/bin", f"PYTHONPATH={readable_copy}", "PYTHONDONTWRITEBYTECODE=1"]
    ran = subprocess.run(
        [*switch, *variables, SYSTEM_PYTHON, "-c", AS_A_USER],
        capture_output=True,
        text=True,
        cwd=readable_copy,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip() == f"{NOBODY} ['hello']", ran.stdout + ran.stderr
