"""Attachments saved into the workspace inbox under the size cap, once however often a mail is read."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.channel_servers.email.dovecot import Dovecot
from tests.channel_servers.email.mailserver import ReceivingMta
from tests.channel_servers.email.support import email_channel, pull, settings_for, submit

pytestmark = pytest.mark.anyio


async def test_attachments_are_saved_under_the_cap_and_the_rest_noted(
    tmp_path: Path, dovecot: Dovecot, mta: tuple[ReceivingMta, int]
) -> None:
    _, port = mta
    message = EmailMessage()
    message["From"] = "ana@example.org"
    message["To"] = "agent7@nexo.test"
    message["Subject"] = "Files"
    message["Message-ID"] = "<files@example.org>"
    message.set_content("See attached.")
    message.add_attachment(b"id,name\n1,Ana\n", maintype="text", subtype="csv", filename="../people.csv")
    message.add_attachment(b"\x89PNG" + b"x" * 5000, maintype="image", subtype="png", filename="big.png")
    submit(port, message.as_string(), mail_from="ana@example.org", to="agent7@nexo.test")
    settings = settings_for(tmp_path, dovecot, port, "agent7").model_copy(
        update={"workspace_dir": tmp_path / "workspace", "max_file_bytes": 1000}
    )
    async with email_channel(settings) as client:
        [event] = await pull(client, 1)
    content = str(event.payload["content"])
    lines = content.splitlines()
    assert lines[:3] == ["Subject: Files", "", "See attached."]
    [reference] = [line for line in lines if line.startswith("[attachment: ")]
    relative = reference.removeprefix("[attachment: ").split(" (")[0]
    assert relative.startswith("inbox/email/")
    assert relative.endswith("/people.csv")
    assert (tmp_path / "workspace" / relative).read_bytes() == b"id,name\n1,Ana\n"
    assert lines[-1] == "[attachment not saved: big.png (image/png) is larger than 1000 bytes]"
    assert sorted(path.name for path in (tmp_path / "workspace").rglob("*") if path.is_file()) == [
        "people.csv"
    ]
