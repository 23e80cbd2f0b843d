"""Replies through the email channel: N replies over the real SMTP path, before and after.

A throwaway Dovecot and the tests' receiving MTA (aiosmtpd, delivering over LMTP) stand in for the
mail system, as in ``tests/channel_servers/email``. One mail from a contact opens a thread; then
each reply is timed three ways, interleaved so all see the same machine load:

- through the channel's ``send_message`` tool (in process): outbox, kept SMTP connection, Sent copy;
- the way replies went before: ``aiosmtplib.send`` with a new TLS context and connection per reply;
- the channel's SMTP sender and Sent folder alone, without the outbox: the outbox's share (its
  SQLite commits, kept durable with ``synchronous=FULL``) is the difference to the first.
"""

from __future__ import annotations

import shutil
import ssl
import time
from pathlib import Path

import aiosmtplib
import anyio
from mcp import Client

from bench.mesh_run import workdir
from bench.stats import Result
from bench.support import describe, progress
from channel_servers.email.sent import SentFolder
from channel_servers.email.server import build_server
from channel_servers.email.smtp import SmtpSender, compose, reply_message_id
from channel_servers.email.store import Parent
from shared.protocol.events import PullParams, PullRequest, PullResult
from tests.channel_servers.email.dovecot import DOVECOT, running_dovecot
from tests.channel_servers.email.mailserver import ReceivingMta, running_mta
from tests.channel_servers.email.support import mail, settings_for, submit

AGENT = "agent"
CONTACT = "ana@example.org"
THREAD = "bench-thread@example.org"


async def _run(tmp: Path, n: int) -> tuple[list[float], list[float], list[float]]:
    with running_dovecot([AGENT, "ana"]) as dovecot:
        mta = ReceivingMta(dovecot, signed={CONTACT})
        with running_mta(mta) as port:
            to = f"{AGENT}@nexo.test"
            submit(port, mail(CONTACT, to, THREAD, "Bench", "first"), mail_from=CONTACT, to=to)
            settings = settings_for(tmp, dovecot, port, AGENT)
            parent = Parent(THREAD, CONTACT, "Bench", ())
            tls = settings.tls_context()
            alone, sent = SmtpSender(settings, tls), SentFolder(settings, tls)
            channel_ms, before_ms, alone_ms = [], [], []
            async with Client(build_server(settings)) as client:
                pulled = await client.session.send_request(
                    PullRequest(params=PullParams(wait_ms=10_000, limit=1)), PullResult
                )
                if not pulled.events:
                    raise RuntimeError("the channel never read the bench's first mail")
                for i in range(-1, n):  # -1: one warm-up of each
                    start = time.perf_counter()
                    result = await client.call_tool(
                        "send_message",
                        {
                            "text": f"reply {i}",
                            "chat_id": THREAD,
                            "reply_to": THREAD,
                            "idempotency_key": f"c{i}",
                        },
                    )
                    took = time.perf_counter() - start
                    if result.is_error:
                        raise RuntimeError(f"send_message failed: {result.content}")
                    message = compose(settings, parent, f"before {i}", reply_message_id(f"b{i}", "nexo.test"))
                    start = time.perf_counter()
                    await aiosmtplib.send(
                        message,
                        hostname=settings.smtp_host,
                        port=settings.smtp_port,
                        tls_context=ssl.create_default_context(),
                        timeout=60,
                    )
                    took_before = time.perf_counter() - start
                    message = compose(settings, parent, f"alone {i}", reply_message_id(f"a{i}", "nexo.test"))
                    start = time.perf_counter()
                    await alone.send(message)
                    await sent.save(message)
                    took_alone = time.perf_counter() - start
                    if i >= 0:
                        channel_ms.append(took * 1000)
                        before_ms.append(took_before * 1000)
                        alone_ms.append(took_alone * 1000)
            await alone.close()
            await sent.close()
    return channel_ms, before_ms, alone_ms


def measure(quick: bool) -> list[Result]:
    n = 10 if quick else 30
    through = Result(
        "email reply through send_message",
        "ms",
        "a new SMTP connection and TLS context per reply (before)",
        relative_target=(1.0, 0.0),
    )
    share = Result("email reply, outbox included", "ms", "the same SMTP and Sent work without the outbox")
    if not Path(DOVECOT).exists() or shutil.which("doveconf") is None:
        through.errors.append("dovecot is not installed (apt-get install dovecot-imapd dovecot-lmtpd)")
        return [through]
    progress(f"email replies: {n} each through send_message, the former way, and without the outbox")
    with workdir() as tmp:
        try:
            channel_ms, before_ms, alone_ms = anyio.run(_run, tmp, n)
        except (OSError, RuntimeError, TimeoutError, aiosmtplib.SMTPException) as exc:
            through.errors.append(describe(exc))
            return [through]
    through.samples, through.baseline = channel_ms, before_ms
    share.samples, share.baseline = list(channel_ms), alone_ms
    return [through, share]
