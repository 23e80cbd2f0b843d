"""Replies are filed in the Sent folder, which settles a reply whose send a killed process interrupted."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.channel_servers.email.dovecot import Dovecot, free_port
from tests.channel_servers.email.mailserver import ReceivingMta
from tests.channel_servers.email.support import email_channel, mail, pull, settings_for, submit
from tests.mesh.chaos_support import read_outbox

pytestmark = pytest.mark.anyio

AGENT = "agent10"


async def test_an_interrupted_reply_is_found_in_the_sent_folder_or_sent_again_once(
    tmp_path: Path, dovecot: Dovecot, mta: tuple[ReceivingMta, int]
) -> None:
    _, port = mta
    to = f"{AGENT}@nexo.test"
    for thread in ("went@example.org", "never@example.org"):
        submit(port, mail("ana@example.org", to, thread, "Hi", thread), mail_from="ana@example.org", to=to)
    settings = settings_for(tmp_path, dovecot, port, AGENT)
    async with email_channel(settings) as client:
        await pull(client, 2)
        went = await client.call_tool(
            "send_message", {"text": "it went", "chat_id": "went@example.org", "idempotency_key": "went"}
        )
        settings.smtp_port = free_port()  # nothing listens there: the second reply is queued
        await client.call_tool(
            "send_message",
            {"text": "it never went", "chat_id": "never@example.org", "idempotency_key": "never"},
        )
    database = tmp_path / "email" / "email.db"
    # What a channel server killed during both sends leaves behind.
    with closing(sqlite3.connect(database)) as conn, conn:
        conn.execute("UPDATE outbox SET status = 'sending'")
    settings.smtp_port = port
    async with email_channel(settings) as client:
        pass
    replies = [
        (str(message["In-Reply-To"]), str(message["Message-ID"]))
        for message in dovecot.messages("ana")
        if str(message["From"]) == to
    ]
    assert went.structured_content is not None
    first_id = f"<{went.structured_content['platform_message_id']}>"
    assert sorted(reply for reply, _ in replies) == ["<never@example.org>", "<went@example.org>"]
    assert (first_id, "<went@example.org>") in [(message_id, reply) for reply, message_id in replies]
    assert {row.idempotency_key: row.status for row in read_outbox(database)} == {
        "went": "sent",
        "never": "sent",
    }
    sent_folder = [str(message["Message-ID"]) for message in dovecot.messages(AGENT, folder="Sent")]
    assert sorted(sent_folder) == sorted(message_id for _, message_id in replies)
