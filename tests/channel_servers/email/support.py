"""Sending test mail through the receiving MTA and running the email channel against Dovecot."""

from __future__ import annotations

import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import Client

from channel_servers.email.server import build_server
from channel_servers.email.settings import EmailSettings
from shared.protocol.events import Event, PullParams, PullRequest, PullResult
from tests.channel_servers.email.dovecot import PASSWORD, Dovecot
from tests.channel_servers.email.mailserver import AUTHSERV_ID


def settings_for(tmp_path: Path, dovecot: Dovecot, smtp_port: int, agent: str) -> EmailSettings:
    return EmailSettings(
        state_dir=tmp_path,
        address=f"{agent}@nexo.test",
        username=agent,
        password=PASSWORD,
        imap_host="127.0.0.1",
        imap_port=dovecot.imap_port,
        imap_security="none",
        smtp_host="127.0.0.1",
        smtp_port=smtp_port,
        smtp_security="none",
        trusted_authserv_id=AUTHSERV_ID,
    )


def submit(smtp_port: int, raw: str, *, mail_from: str, to: str) -> None:
    with smtplib.SMTP("127.0.0.1", smtp_port) as smtp:
        smtp.sendmail(mail_from, [to], raw.replace("\n", "\r\n").encode())


def mail(sender: str, to: str, message_id: str, subject: str, body: str, *extra: str) -> str:
    headers = [f"From: {sender}", f"To: {to}", f"Subject: {subject}", f"Message-ID: <{message_id}>", *extra]
    return "\n".join(headers) + "\n\n" + body + "\n"


@asynccontextmanager
async def email_channel(settings: EmailSettings) -> AsyncIterator[Client]:
    async with Client(build_server(settings)) as client:
        yield client


async def pull(client: Client, count: int, *, timeout_s: float = 20.0) -> list[Event]:
    """Wait until ``count`` messages are stored, then return them (and fail if more are)."""
    with anyio.fail_after(timeout_s):
        while True:
            result = await client.session.send_request(
                PullRequest(params=PullParams(wait_ms=2000, limit=100)), PullResult
            )
            if len(result.events) >= count:
                return result.events
