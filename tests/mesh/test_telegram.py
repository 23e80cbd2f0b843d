"""The Telegram channel in a running mesh: pairing a stranger, answering in the same chat and topic,
and approving a tool call with a button press. The Bot API is the stand-in, served from a thread of
the test so the blocking mesh helpers can wait while it answers.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.fakes.llm import CallTool, FakeLLM, RecordedRequest, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.fakes.telegram_api import BOT_USERNAME, TOKEN, FakeTelegram
from tests.fakes.telegram_wire import Sent
from tests.mesh.harness import nexo, python_server, running, write_config

pytestmark = pytest.mark.scenario

OPERATOR = 5550001
STRANGER = 5550042
FORUM = -1009876543210
WRONG_TOKEN = "654321:AAHwrongTokenWrongTokenWrongToken0"
CODE = re.compile(r"\b([A-HJ-NP-Z2-9]{4}-?[A-HJ-NP-Z2-9]{4})\b")


@contextmanager
def stand_in() -> Iterator[tuple[FakeTelegram, BlockingPortal]]:
    fake = FakeTelegram()
    with start_blocking_portal() as portal:
        portal.call(fake.chat, OPERATOR)
        portal.call(functools.partial(fake.chat, FORUM, "supergroup", is_forum=True))
        with portal.wrap_async_context_manager(fake.serve()):
            yield fake, portal


def config_for(tmp_path: Path, llm_url: str, api_url: str, notes: Path) -> Path:
    telegram_env = {
        "NEXO_TELEGRAM_BOT_TOKEN": TOKEN,
        "NEXO_TELEGRAM_API_BASE_URL": api_url,
        "NEXO_TELEGRAM_POLL_TIMEOUT_S": "5",
        "NEXO_TELEGRAM_APPROVAL_CHAT_IDS": json.dumps([str(OPERATOR)]),
    }
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "telegram": python_server("channel_servers.telegram", env=telegram_env),
            "pairing": python_server("servers.pairing"),
            "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)}),
        },
        agent={"channels": ["telegram"]},
        extra={
            "channel_options": {
                "telegram": {
                    "rate_per_minute": None,
                    "approval_timeout_s": 120,
                    "pairing": {
                        "platform": "telegram",
                        "policy": "pairing",
                        "group_policy": "open",
                        "allow_from": [str(OPERATOR)],
                    },
                }
            }
        },
    )


def sent_to(fake: FakeTelegram, portal: BlockingPortal, chat_id: int, count: int) -> list[Sent]:
    """The first ``count`` messages the bot sent to ``chat_id``, waiting (bounded) for them."""

    async def wait() -> list[Sent]:
        while len(fake.sent_to(chat_id)) < count:
            await fake.sent_count(len(fake.sent) + 1, timeout=90)
        return fake.sent_to(chat_id)[:count]

    return portal.call(wait)


def test_a_paired_contact_is_answered_and_the_operator_approves_with_a_button(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    seen: list[str] = []

    def report(request: RecordedRequest) -> ModelReply:
        (_, content, _), *_ = request.tool_results
        seen.append(content)
        return ModelReply("noted")

    script: list[ScriptItem] = [
        ModelReply("welcome, Bob"),
        ModelReply("answered in the topic"),
        CallTool("notes__write_note", {"text": "buy milk"}),
        report,
    ]
    with stand_in() as (fake, portal), FakeLLM(script) as llm:
        config = config_for(tmp_path, llm.openai_base_url, fake.base_url, notes)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server telegram ready", timeout=60)
            inject = functools.partial(portal.call, fake.inject)

            # A stranger gets a pairing code and no model turn.
            inject(portal.call(functools.partial(fake.message, STRANGER, "hi, I'm Bob", first_name="Bob")))
            [challenge] = sent_to(fake, portal, STRANGER, 1)
            found = CODE.search(challenge.text)
            assert found is not None, challenge.text
            assert llm.requests == []
            approved = nexo("pair", "approve", found.group(1), "--config", str(config), "--json")
            assert approved.returncode == 0, approved.stderr

            # Now paired, the contact is answered in the same chat.
            inject(portal.call(functools.partial(fake.message, STRANGER, "thanks!", first_name="Bob")))
            answer = sent_to(fake, portal, STRANGER, 2)[1]

            # In a forum topic, the answer goes to the same topic.
            topic = functools.partial(
                fake.message, STRANGER, f"@{BOT_USERNAME} and here?", chat_id=FORUM, thread_id=7
            )
            mention = {"entities": [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]}
            inject(portal.call(functools.partial(topic, extra=mention)))
            [in_topic] = sent_to(fake, portal, FORUM, 1)

            # The operator's request needs approval: buttons on the operator's chat.
            inject(portal.call(functools.partial(fake.message, OPERATOR, "note: buy milk")))
            [prompt] = sent_to(fake, portal, OPERATOR, 1)
            assert prompt.reply_markup is not None
            allow = prompt.reply_markup["inline_keyboard"][0][0]["callback_data"]
            request_id = allow.rsplit(":", 1)[1]
            inject(portal.call(fake.press, STRANGER, prompt, allow))  # not an approver
            orch.wait_for_line("not an approver", timeout=60)
            inject(portal.call(fake.press, OPERATOR, prompt, allow))
            _, refused, done = sent_to(fake, portal, OPERATOR, 3)
            edited = portal.call(functools.partial(fake.called, "editMessageText", timeout=60))
    assert (answer.text, answer.reply_to) == ("welcome, Bob", 3)  # "thanks!" follows the code
    assert (in_topic.text, in_topic.thread_id) == ("answered in the topic", 7)
    assert done.text == "noted"
    assert refused.text.startswith(f"[refused] your answer to approval {request_id} was not counted: sender")
    assert notes.read_text() == "buy milk\n"
    assert seen == ['{"result": "wrote 8 characters"}']
    assert prompt.text.startswith("Request ")
    assert "approved" in prompt.text
    assert fake.sent_to(OPERATOR)[0].reply_markup is None  # edited: the buttons are gone
    assert len(edited) == 1
    assert "hi, I'm Bob" not in "".join(request.last_user_text or "" for request in llm.requests)


def test_channel_doctor_shows_why_a_bot_with_a_wrong_token_cannot_start(tmp_path: Path) -> None:
    with stand_in() as (fake, _):
        telegram_env = {"NEXO_TELEGRAM_BOT_TOKEN": WRONG_TOKEN, "NEXO_TELEGRAM_API_BASE_URL": fake.base_url}
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url="http://127.0.0.1:9/v1",
            servers={"telegram": python_server("channel_servers.telegram", env=telegram_env)},
            agent={"channels": ["telegram"]},
        )
        channel = nexo("channel", "doctor", "--config", str(config))
    line = (
        "channel_servers.telegram: Telegram refused the bot token (Unauthorized): set "
        "NEXO_TELEGRAM_BOT_TOKEN to the token @BotFather gave (/token), then restart"
    )
    assert channel.returncode == 1
    assert line in channel.stderr.splitlines()
    assert (
        f"telegram     FAIL start for nexo: the server failed to start or connect: {line}. Fix: "
        in channel.stdout
    )
    assert WRONG_TOKEN.split(":")[1] not in channel.stdout + channel.stderr
