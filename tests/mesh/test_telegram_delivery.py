"""Telegram delivery under crashes: 500 updates, each delivered 1-3 times by the Bot API stand-in,
while the orchestrator is SIGKILLed 10 times and restarted.

Every update is stored once and answered exactly once (or, when a kill landed while its answer was
in flight, recorded as ``uncertain`` and sent at most once), answers keep each chat's order, and
the polling offset never skips an update.
"""

from __future__ import annotations

import random
import re
import signal
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from tests.fakes.llm import FakeLLM
from tests.fakes.telegram_api import TOKEN, FakeTelegram
from tests.mesh.chaos_support import (
    answer,
    echo_model,
    message_ids,
    question,
    read_events,
    read_outbox,
    wait_exited,
)
from tests.mesh.harness import child_pids, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

SEED = 20_261_126
MESSAGES = 500
KILLS = 10
USERS = tuple(range(5551001, 5551011))
ANSWER = re.compile(r"answer to (m\d{4})")
SENTINEL = re.compile(r"answer to s\d+")


def answered(fake: FakeTelegram) -> list[str]:
    return [found.group(1) for sent in fake.sent if (found := ANSWER.fullmatch(sent.text))]


@pytest.mark.timeout(600)
async def test_every_update_is_answered_once_in_order_across_ten_sigkills(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    ids = message_ids(MESSAGES)
    chat_of = {message_id: USERS[n % len(USERS)] for n, message_id in enumerate(ids)}
    state = tmp_path / "state"
    fake = FakeTelegram()
    deliveries = 0
    update_ids = []
    for message_id in ids:
        times = rng.randint(1, 3)
        deliveries += times
        update_ids.append(fake.inject(fake.message(chat_of[message_id], question(message_id)), times=times))
    async with fake.serve() as api_url:
        with FakeLLM(default=echo_model) as llm:
            config = write_config(
                tmp_path / "agents.yaml",
                state_dir=state,
                llm_base_url=llm.openai_base_url,
                servers={
                    "telegram": python_server(
                        "channel_servers.telegram",
                        env={
                            "NEXO_TELEGRAM_BOT_TOKEN": TOKEN,
                            "NEXO_TELEGRAM_API_BASE_URL": api_url,
                            "NEXO_TELEGRAM_POLL_TIMEOUT_S": "5",
                        },
                    )
                },
                agent={"channels": ["telegram"], "history_turns": 0},
                extra={
                    "channel_options": {
                        "telegram": {
                            "rate_per_minute": None,
                            "pairing": {"platform": "telegram", "allow_from": [str(u) for u in USERS]},
                        }
                    }
                },
            )
            for kill in range(KILLS + 1):
                with ExitStack() as stack:
                    orch = await anyio.to_thread.run_sync(stack.enter_context, running(config))
                    if kill == KILLS:
                        # Each chat answers in order and acknowledges a message before the next:
                        # once every chat's last word is answered, everything before it is settled.
                        for user in USERS:
                            fake.inject(fake.message(user, question(f"s{user}")))
                        while len(SENTINEL.findall(" ".join(sent.text for sent in fake.sent))) < len(USERS):
                            await fake.sent_count(len(fake.sent) + 1, timeout=120)
                        break
                    await fake.sent_count((kill + 1) * MESSAGES // (KILLS + 2), timeout=120)
                    children = child_pids(orch.process.pid, "channel_servers.telegram")
                    orch.process.send_signal(signal.SIGKILL)
                    await anyio.to_thread.run_sync(orch.process.wait)
                    await wait_exited(children)

    database = state / "telegram" / "telegram.db"
    by_message = {f"msg:{chat_of[i]}:{n}": i for i, n in _message_numbers(ids, chat_of).items()}
    events = [event for event in read_events(database) if event.dedupe_key in by_message]
    outbox = [row for row in read_outbox(database) if ANSWER.fullmatch(row.text)]
    times_answered = Counter(answered(fake))
    summary = (
        f"{MESSAGES} updates ({deliveries} deliveries), {KILLS} kills: "
        f"{Counter(row.status for row in outbox)}, {sum(1 for e in events if e.deliveries > 1)} redelivered"
    )
    print(summary)
    assert sorted(event.dedupe_key for event in events) == sorted(by_message), summary
    assert all(event.acked and not event.dead for event in events), summary
    assert fake.confirmed_offset > max(update_ids), summary
    fates = {row.text: row.status for row in outbox}
    for message_id in ids:
        status = fates.get(answer(message_id))
        allowed = {1} if status == "sent" else {0, 1}
        assert status in ("sent", "uncertain"), (message_id, summary)
        assert times_answered[message_id] in allowed, (message_id, summary)
    for user in USERS:
        order = [i for i in answered(fake) if chat_of[i] == user]
        assert order == sorted(order), (user, summary)


def _message_numbers(ids: list[str], chat_of: dict[str, int]) -> dict[str, int]:
    """The message id Telegram gave each question in its chat (the stand-in numbers them from 1)."""
    seen: Counter[int] = Counter()
    numbers = {}
    for message_id in ids:
        seen[chat_of[message_id]] += 1
        numbers[message_id] = seen[chat_of[message_id]]
    return numbers
