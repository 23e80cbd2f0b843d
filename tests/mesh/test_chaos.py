"""Channel chaos: console messages while the mesh is SIGKILLed and restarted, over stdio and over HTTP.

Over stdio 1,000 messages and 20 kills of the orchestrator (its console child dies with it). Over
Streamable HTTP the console is its own ``nexo serve console --http`` process with a bearer token, and
each kill takes down both it and the orchestrator, as a host crash would; that run is smaller (100
messages, 3 kills) to keep the suite fast, and its assertions are the same, per message: every
message ends up answered exactly once, or, when the kill landed while its reply was in flight,
recorded as ``uncertain`` and never shown again; none may be lost or left unacknowledged.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm import FakeLLM
from tests.mesh.chaos_support import (
    SENTINEL,
    ChaosDriver,
    Tally,
    answer,
    echo_model,
    event_key,
    message_ids,
    plan,
    read_events,
    read_outbox,
    reply_key,
)
from tests.mesh.harness import free_port, http_console, http_server_entry, python_server, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

SEED = 20_261_107
WINDOW = 16
"""The largest burst of messages; the next burst goes out once at most WINDOW // 4 are unanswered."""
TOKEN = "chaos-http-token"
RUNS = [
    pytest.param("stdio", 1_000, 20, id="stdio"),
    pytest.param("http", 100, 3, id="http"),
]
"""Transport, messages, kills."""


def _summary(
    messages: int, tally: Tally, statuses: Counter[str], shown_uncertain: int, redelivered: int
) -> str:
    return (
        f"{messages} messages, {tally.kills} kills: {statuses['sent']} sent, "
        f"{statuses['uncertain']} uncertain ({shown_uncertain} of them reached the chat before the kill); "
        f"{redelivered} events redelivered, "
        f"{tally.resent} messages said again after a reconnect ({tally.duplicate_acks} already stored), "
        f"{tally.late_connects} reconnects after the new orchestrator had answered; "
        f"epochs {min(tally.epoch_seconds):.1f}-{max(tally.epoch_seconds):.1f} s, "
        f"total {sum(tally.epoch_seconds):.1f} s"
    )


@pytest.mark.timeout(600)  # stdio, twenty SIGKILLs and restarts: 180-260 s on 2 cores; http: 4 epochs
@pytest.mark.parametrize(("transport", "messages", "kills"), RUNS)
async def test_every_message_is_answered_once_or_reported_uncertain_across_sigkills(
    tmp_path: Path, transport: str, messages: int, kills: int
) -> None:
    ids = message_ids(messages)
    state = tmp_path / "state"
    console: dict[str, Any] = python_server("channel_servers.console")
    alongside = None
    if transport == "http":
        port = free_port()
        console = http_server_entry(port, TOKEN)
        alongside = lambda: http_console(port, state, TOKEN)  # noqa: E731
    with FakeLLM(default=echo_model) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=state,
            llm_base_url=llm.openai_base_url,
            servers={"console": console},
            agent={"history_turns": 0},
            # The rate limit has its own tests; here it would only stretch the run.
            extra={"channel_options": {"console": {"rate_per_minute": None}}},
        )
        # Burst sizes are drawn as the run goes, so they get their own generator: the plan stays fixed.
        driver = ChaosDriver(
            config, state, ids, window=WINDOW, bursts=random.Random(SEED + 1), alongside=alongside
        )
        tally = await driver.run(plan(random.Random(SEED), messages, kills, WINDOW), time.monotonic)

    database = state / "console" / "console.db"
    outbox = {row.idempotency_key: row for row in read_outbox(database)}
    events = {row.dedupe_key: row for row in read_events(database)}
    received = Counter(reply.message_id for reply in tally.replies)
    drained = outbox.pop(reply_key(SENTINEL))
    events.pop(event_key(SENTINEL))
    statuses: Counter[str] = Counter(row.status for row in outbox.values())
    shown_uncertain = sum(1 for row in outbox.values() if row.status == "uncertain" and received[str(row.id)])
    redelivered = sum(1 for row in events.values() if row.deliveries > 1)
    summary = f"{transport}: " + _summary(messages, tally, statuses, shown_uncertain, redelivered)
    print(summary)

    assert (tally.kills, received[str(drained.id)]) == (kills, 1), summary
    assert redelivered > 0, f"no kill interrupted a message in progress: {summary}"
    # Nothing lost: each message is stored once and acknowledged by the orchestrator.
    assert {key: (row.kind, row.acked, row.dead) for key, row in events.items()} == {
        event_key(i): ("message", True, False) for i in ids
    }, summary
    # One outbox entry per message (no notices, no strays), finished as sent and shown exactly once,
    # or uncertain (interrupted in flight) and shown at most once: the console never resends it.
    assert set(outbox) == {reply_key(i) for i in ids}, summary
    assert {row.reply_to: (row.text, row.notice) for row in outbox.values()} == {
        i: (answer(i), False) for i in ids
    }, summary
    fates = {row.reply_to: (row.status, received[str(row.id)]) for row in outbox.values()}
    allowed = {("sent", 1), ("uncertain", 0), ("uncertain", 1)}
    assert {i: fate for i, fate in fates.items() if fate not in allowed} == {}, summary
    # Every frame the chat got is one of those entries, and no answer text came twice.
    by_id = {str(row.id): (row.text, row.reply_to, False) for row in [*outbox.values(), drained]}
    strays = [r for r in tally.replies if by_id.get(r.message_id) != (r.text, r.reply_to, r.notice)]
    assert strays == [], summary
    repeated = [text for text, n in Counter(reply.text for reply in tally.replies).items() if n > 1]
    assert repeated == [], summary
