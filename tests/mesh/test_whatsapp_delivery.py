"""WhatsApp delivery under crashes: 500 messages, each delivered 1 to 3 times, the orchestrator
SIGKILLed 10 times. Every message is answered exactly once, or recorded ``uncertain`` and shown at
most once, and the answers of each chat arrive in the order its messages were sent.

The WhatsApp channel server is the orchestrator's child: when the orchestrator dies, the child
sees its stdin close and exits, and the next orchestrator starts a new one on the same webhook
port. Messages are delivered only while a channel is up, as Meta's retries would eventually do.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import time
from collections import Counter
from contextlib import AbstractContextManager, closing
from functools import partial
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.whatsapp_api import FakeWhatsApp, serve
from tests.mesh.chaos_support import answer, echo_model, question, wait_exited
from tests.mesh.harness import Orchestrator, child_pids, free_port, running, write_config
from tests.mesh.test_whatsapp import whatsapp_server

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

SEED = 20_261_126
MESSAGES = 500
KILLS = 10
CONTACTS = [f"1555100{n:04d}" for n in range(8)]
_ANSWER = re.compile(r"^answer to (m\d{4})$")


def answered(fake: FakeWhatsApp) -> list[tuple[str, str]]:
    """(contact, message id) of every answer the platform took, in the order it took them."""
    found = []
    for message in fake.messages("text"):
        match = _ANSWER.match(message["text"]["body"])
        if match:
            found.append((str(message["to"]), match.group(1)))
    return found


def outbox(state: Path) -> dict[str, tuple[str, str]]:
    """reply_to (the wamid answered) -> (status, text) of each reply the channel recorded."""
    database = state / "whatsapp" / "whatsapp.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT reply_to, status, text FROM outbox WHERE notice = 0").fetchall()
    return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}


def unacked(state: Path) -> int:
    database = state / "whatsapp" / "whatsapp.db"
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM events WHERE acked_at IS NULL").fetchone()[0])


def settled(fake: FakeWhatsApp, state: Path) -> int:
    """Messages answered on the platform or recorded uncertain (never to be shown again)."""
    uncertain = {
        reply_to.removeprefix("wamid.")
        for reply_to, (status, _) in outbox(state).items()
        if status == "uncertain"
    }
    return len({i for _, i in answered(fake)} | uncertain)


def reached(fake: FakeWhatsApp, *, state: Path, goal: int) -> bool:
    return settled(fake, state) >= goal


async def start(config: Path) -> tuple[Orchestrator, AbstractContextManager[Orchestrator]]:
    mesh = running(config, timeout=120)
    orch = await anyio.to_thread.run_sync(mesh.__enter__)
    await anyio.to_thread.run_sync(lambda: orch.wait_for_line("server whatsapp ready", timeout=60))
    return orch, mesh


@pytest.mark.timeout(600)
async def test_500_whatsapp_messages_are_answered_once_in_order_across_ten_sigkills(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    fake = FakeWhatsApp()
    port = free_port()
    state = tmp_path / "state"
    ids = [f"m{n:04d}" for n in range(MESSAGES)]
    chat_of = {i: rng.choice(CONTACTS) for i in ids}
    # Kill once this many answers arrived: spread over the run, always with messages still in flight.
    kill_after = sorted(rng.sample(range(20, MESSAGES - 20), KILLS))
    began = time.monotonic()
    copies = 0
    async with serve(fake):
        with FakeLLM(default=echo_model) as llm:
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=state,
                llm_base_url=llm.openai_base_url,
                servers={"whatsapp": whatsapp_server(fake, port)},
                agent={"channels": ["whatsapp"], "history_turns": 0},
                extra={
                    "channel_options": {
                        "whatsapp": {"rate_per_minute": None, "pairing": {"allow_from": CONTACTS}}
                    }
                },
            )
            webhook = f"http://127.0.0.1:{port}/webhook"
            sent = 0
            for epoch in range(KILLS + 1):
                orch, mesh = await start(config)
                channel = child_pids(orch.process.pid, "channel_servers.whatsapp")
                try:
                    goal = kill_after[epoch] if epoch < KILLS else MESSAGES
                    # Enough messages out that the kill lands with some still being answered; the
                    # client is closed before the kill, so the dying channel has no open connection.
                    upto = min(MESSAGES, goal + rng.randint(5, 15))
                    async with httpx2.AsyncClient() as http:
                        while sent < upto:
                            message_id = ids[sent]
                            payload = fake.text(
                                chat_of[message_id], question(message_id), message_id=f"wamid.{message_id}"
                            )
                            times = rng.randint(1, 3)
                            copies += times
                            assert await fake.deliver(http, webhook, payload, times=times) == [200] * times
                            sent += 1
                    await fake.wait_for(partial(reached, state=state, goal=goal), 120)
                    if epoch < KILLS:
                        os.kill(orch.process.pid, signal.SIGKILL)
                        # The orphaned channel sees its stdin close and exits, freeing the port.
                        await wait_exited(channel)
                finally:
                    await anyio.to_thread.run_sync(partial(mesh.__exit__, None, None, None))
    took = time.monotonic() - began
    replies = outbox(state)
    shown = Counter(i for _, i in answered(fake))
    summary = (
        f"{MESSAGES} messages ({copies} deliveries), {KILLS} kills in {took:.1f} s: "
        f"{Counter(status for status, _ in replies.values())}"
    )
    print(summary)
    assert unacked(state) == 0, summary
    assert set(replies) == {f"wamid.{i}" for i in ids}, summary
    fates = {i: (replies[f"wamid.{i}"][0], shown[i]) for i in ids}
    allowed = {("sent", 1), ("uncertain", 0), ("uncertain", 1)}
    assert {i: fate for i, fate in fates.items() if fate not in allowed} == {}, summary
    assert all(replies[f"wamid.{i}"][1] == answer(i) for i in ids)
    for contact in CONTACTS:
        in_chat = [i for to, i in answered(fake) if to == contact]
        assert in_chat == sorted(in_chat), f"answers to {contact} out of order: {json.dumps(in_chat)}"
