"""Permission prompts by mail to the approvers, answered by ``yes <id>`` in the reply's first line."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.protocol.permission_prompts import (
    PermissionPrompt,
    PermissionRequestAccepted,
    PermissionRequestCall,
)
from tests.channel_servers.email.dovecot import Dovecot
from tests.channel_servers.email.mailserver import ReceivingMta
from tests.channel_servers.email.support import email_channel, mail, pull, settings_for, submit

pytestmark = pytest.mark.anyio


async def test_an_approver_answers_a_prompt_by_reply_and_nobody_else_can(
    tmp_path: Path, dovecot: Dovecot, mta: tuple[ReceivingMta, int]
) -> None:
    _, port = mta
    to = "agent6@nexo.test"
    settings = settings_for(tmp_path, dovecot, port, "agent6").model_copy(
        update={"approvers": ["ana@example.org"]}
    )
    async with email_channel(settings) as client:
        prompt = PermissionPrompt(
            request_id="kmpqr",
            tool_name="workspace__write_file",
            description="Write notes.md",
            input_preview='{"path": "notes.md"}',
        )
        accepted = await client.session.send_request(
            PermissionRequestCall(params=prompt), PermissionRequestAccepted
        )
        [shown] = [m for m in dovecot.messages("ana") if "kmpqr" in str(m["Subject"])]
        not_an_approver = mail("eve@lists.example.org", to, "eve-yes@example.org", "", "yes kmpqr")
        submit(port, not_an_approver, mail_from="eve@lists.example.org", to=to)
        answer = mail(
            "ana@example.org",
            to,
            "ana-yes@example.org",
            f"Re: {shown['Subject']}",
            "\nyes kmpqr\n\n> Reply with 'yes kmpqr' to allow",
            f"In-Reply-To: {shown['Message-ID']}",
            f"References: {shown['Message-ID']}",
        )
        submit(port, answer, mail_from="ana@example.org", to=to)
        events = await pull(client, 2)
    assert accepted.delivered == 1
    assert shown["Subject"] == "Approve workspace__write_file? (kmpqr)"
    assert "Reply with 'yes kmpqr' to allow" in shown.get_content()
    assert [(event.kind, event.payload.get("content"), event.payload.get("sender")) for event in events] == [
        ("message", "Subject: (none)\n\nyes kmpqr", None),
        ("permission_verdict", None, "ana@example.org"),
    ]
    assert events[1].payload["behavior"] == "allow"
