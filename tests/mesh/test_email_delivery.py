"""Email delivery under crashes: 200 mails to the agent while the orchestrator is SIGKILLed 5 times.

Real Dovecot and a real SMTP server: each mail is stored once and answered exactly once, threaded
to its own mail, as the senders' mailboxes show over IMAP; none is lost. A kill lands while replies
are in flight: the channel server, whose host is gone, finishes those sends and records them
before it exits, so the new orchestrator's retry of the same answer finds it sent.
"""

from __future__ import annotations

import email
import email.policy
import re
import signal
import smtplib
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from tests.channel_servers.email.dovecot import PASSWORD, Dovecot, running_dovecot
from tests.channel_servers.email.mailserver import AUTHSERV_ID, ReceivingMta, running_mta
from tests.fakes.llm import FakeLLM
from tests.mesh.chaos_support import (
    echo_model,
    message_ids,
    question,
    read_events,
    read_outbox,
    wait_exited,
)
from tests.mesh.harness import child_pids, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

MESSAGES = 200
KILLS = 5
USERS = tuple(f"user{n}" for n in range(10))
ANSWER = re.compile(r"answer to (m\d{4})")


def _answers(mta: ReceivingMta) -> set[str]:
    """The messages answered so far, as the receiving server saw the replies go by."""
    found = set()
    for _, raw in list(mta.delivered):
        message = email.message_from_bytes(raw, policy=email.policy.default)
        if str(message["From"]) != "agent@nexo.test":
            continue
        text = message.get_body(preferencelist=("plain",))
        matched = ANSWER.search(str(text.get_content()) if text is not None else "")
        if matched:
            found.add(matched.group(1))
    return found


def _replies_in_mailboxes(dovecot: Dovecot) -> Counter[tuple[str, str]]:
    """(In-Reply-To, the message its text answers) of every reply in the senders' mailboxes."""
    replies: Counter[tuple[str, str]] = Counter()
    for user in USERS:
        for message in dovecot.messages(user):
            if str(message["From"]) != "agent@nexo.test":
                continue
            text = message.get_body(preferencelist=("plain",))
            matched = ANSWER.search(str(text.get_content()) if text is not None else "")
            replies[(str(message["In-Reply-To"]), matched.group(1) if matched else "")] += 1
    return replies


@pytest.mark.timeout(600)
async def test_every_mail_is_answered_once_across_five_sigkills(tmp_path: Path) -> None:
    ids = message_ids(MESSAGES)
    sender_of = {message_id: f"{USERS[n % len(USERS)]}@example.org" for n, message_id in enumerate(ids)}
    state = tmp_path / "state"
    with running_dovecot(["agent", *USERS]) as dovecot:
        mta = ReceivingMta(dovecot, signed=set(sender_of.values()))
        with running_mta(mta) as smtp_port, FakeLLM(default=echo_model) as llm:
            with smtplib.SMTP("127.0.0.1", smtp_port) as smtp:
                for message_id in ids:
                    raw = (
                        f"From: {sender_of[message_id]}\r\nTo: agent@nexo.test\r\n"
                        f"Subject: question {message_id}\r\nMessage-ID: <{message_id}@example.org>\r\n\r\n"
                        f"{question(message_id)}\r\n"
                    )
                    smtp.sendmail(sender_of[message_id], ["agent@nexo.test"], raw.encode())
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=state,
                llm_base_url=llm.openai_base_url,
                servers={
                    "email": python_server(
                        "channel_servers.email",
                        env={
                            "NEXO_EMAIL_ADDRESS": "agent@nexo.test",
                            "NEXO_EMAIL_USERNAME": "agent",
                            "NEXO_EMAIL_PASSWORD": PASSWORD,
                            "NEXO_EMAIL_IMAP_HOST": "127.0.0.1",
                            "NEXO_EMAIL_IMAP_PORT": str(dovecot.imap_port),
                            "NEXO_EMAIL_IMAP_SECURITY": "none",
                            "NEXO_EMAIL_SMTP_HOST": "127.0.0.1",
                            "NEXO_EMAIL_SMTP_PORT": str(smtp_port),
                            "NEXO_EMAIL_SMTP_SECURITY": "none",
                            "NEXO_EMAIL_TRUSTED_AUTHSERV_ID": AUTHSERV_ID,
                        },
                    )
                },
                agent={"channels": ["email"], "history_turns": 0},
                extra={
                    "channel_options": {
                        "email": {
                            "rate_per_minute": None,
                            "pairing": {"platform": "email", "allow_from": sorted(set(sender_of.values()))},
                        }
                    }
                },
            )
            base = len(mta.delivered)  # the questions themselves
            database = state / "email" / "email.db"
            for kill in range(KILLS + 1):
                with ExitStack() as stack:
                    orch = await anyio.to_thread.run_sync(stack.enter_context, running(config))
                    if kill == KILLS:
                        # Settled: every mail answered and acknowledged (the acknowledgement follows
                        # the reply, so look again after each delivery and at least every second).
                        with anyio.fail_after(180):
                            while not _settled(ids, mta, database):
                                await anyio.to_thread.run_sync(
                                    mta.wait_delivered, len(mta.delivered) + 1, 1.0
                                )
                        break
                    # Kill after some progress, but never wait for more answers than are left: a
                    # fast epoch may answer everything, and then this kill lands on the redeliveries.
                    step = MESSAGES // (KILLS + 2) // 2
                    target = min(max(len(mta.delivered), base) + step, base + MESSAGES)
                    await anyio.to_thread.run_sync(mta.wait_delivered, target, 120)
                    assert len(mta.delivered) >= target, f"answers stalled; log:\n{orch.log()[-3000:]}"
                    children = child_pids(orch.process.pid, "channel_servers.email")
                    orch.process.send_signal(signal.SIGKILL)
                    await anyio.to_thread.run_sync(orch.process.wait)
                    await wait_exited(children)

            replies = _replies_in_mailboxes(dovecot)

    keys = {f"message-id:{message_id}@example.org" for message_id in ids}
    events = [event for event in read_events(database) if event.dedupe_key in keys]
    outbox = Counter(row.status for row in read_outbox(database) if ANSWER.fullmatch(row.text))
    summary = f"{MESSAGES} mails, {KILLS} kills: outbox {dict(outbox)}, {sum(replies.values())} replies"
    print(summary)
    assert sorted(event.dedupe_key for event in events) == sorted(keys), summary
    assert all(event.acked and not event.dead for event in events), summary
    assert outbox == {"sent": MESSAGES}, summary
    assert replies == Counter({(f"<{message_id}@example.org>", message_id): 1 for message_id in ids}), summary


def _settled(ids: list[str], mta: ReceivingMta, database: Path) -> bool:
    if not set(ids) <= _answers(mta):
        return False
    keys = {f"message-id:{message_id}@example.org" for message_id in ids}
    acked = {event.dedupe_key for event in read_events(database) if event.acked}
    return keys <= acked
