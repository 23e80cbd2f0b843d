"""Messages that cannot be handled are set aside (never dropped, never blocking); rates are enforced."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from shared import unix_socket
from shared.protocol.console_wire import Reply, Say
from tests.fakes.llm import FakeLLM, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.mesh.console import next_frame, operator
from tests.mesh.harness import nexo, python_server, running, write_config

pytestmark = [pytest.mark.scenario, pytest.mark.anyio]

AS_CONTACT = {"policy": "open", "allow_from": []}
"""The console's sender admitted as a contact: the owner's own messages are never rate limited."""


def _console_config(tmp_path: Path, llm_url: str, **options: Any) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={"console": python_server("channel_servers.console")},
        extra={"channel_options": {"console": options}} if options else None,
    )


@pytest.mark.timeout(
    300
)  # several nexo commands, each a process start: near the default 120 s on a loaded machine
async def test_a_malformed_event_becomes_a_dead_letter_the_operator_can_list_replay_and_purge(
    tmp_path: Path,
) -> None:
    with FakeLLM([]) as llm:
        config = _console_config(tmp_path, llm.openai_base_url)
        with running(config):
            pass  # creates the console's database
        with sqlite3.connect(tmp_path / "state" / "console" / "console.db") as db:
            db.execute(
                "INSERT INTO events(kind, dedupe_key, payload, created_at) VALUES ('message', 'bad-1', ?, ?)",
                (json.dumps({"meta": {"chat_id": "operator"}}), time.time()),
            )
        with running(config) as orch:
            orch.wait_for_line("dead letter console:1")
            async with operator(tmp_path / "state") as session:
                notice = await next_frame(session, Reply)
            listed = nexo("dlq", "list", "--json", "--config", str(config))
            replayed = nexo("dlq", "replay", "console:1", "--config", str(config))
            orch.wait_for_line("dead letter console:2")  # replayed at the end of the log; still malformed
            not_dead = nexo("dlq", "replay", "console:99", "--config", str(config))
        offline = nexo("dlq", "list", "--config", str(config))  # the daemon is down: starts the console
        purged = nexo("dlq", "purge", "--config", str(config))
        empty = nexo("dlq", "list", "--config", str(config))
        assert llm.requests == []
    assert notice.notice
    assert notice.text.startswith("[dead letter] a message from console (event 1) failed 1 times")
    (dead,) = json.loads(listed.stdout)["dead"]
    assert (dead["server"], dead["seq"], dead["dedupe_key"]) == ("console", 1, "bad-1")
    assert "content" in dead["reason"]
    assert replayed.stdout == "replayed console:1: the agent will handle it again\n"
    assert not_dead.returncode == 1
    assert "console:99 is not a dead letter" in not_dead.stderr
    assert offline.stdout.startswith("console:2  ")
    assert purged.stdout == "purged 1 dead letters\n"
    assert empty.stdout == "no dead letters\n"


async def test_a_reply_that_keeps_failing_is_retried_then_set_aside_and_the_operator_told_once(
    tmp_path: Path,
) -> None:
    inbox, replies = tmp_path / "inbox.sock", tmp_path / "replies.jsonl"
    script: list[ScriptItem] = [ModelReply("answer one"), ModelReply("answer two")]
    with FakeLLM(script) as llm:
        config = write_config(
            tmp_path / "agents.yaml",
            state_dir=tmp_path / "state",
            llm_base_url=llm.openai_base_url,
            servers={
                "console": python_server("channel_servers.console"),
                "cc": python_server(
                    "tests.fakes.claude_channel",
                    env={"CLAUDE_CHANNEL_INBOX": str(inbox), "CLAUDE_CHANNEL_REPLIES": str(replies)},
                    protocol="legacy",
                ),
            },
            agent={"channels": ["console", "cc"]},
            extra={
                "channel_options": {
                    "cc": {"outbound_tool_name": "no_such_tool", "max_attempts": 2, "retry_backoff_s": 0.05}
                }
            },
        )
        with running(config) as orch:
            orch.wait_for_line("server cc ready")
            async with operator(tmp_path / "state") as session:
                stream = await unix_socket.connect(inbox)
                async with stream:
                    await stream.send(
                        b'{"content": "hello", "meta": {"chat_id": "local", "user_id": "local"}}\n'
                    )
                notice = await next_frame(session, Reply)
            # The notice can overtake the daemon's stderr on its way into the test: wait for the lines.
            first = orch.wait_for_line("message cc:-1 failed (attempt 1 of 2)")
            second = orch.wait_for_line("message cc:-1 failed (attempt 2 of 2)", start=first)
            log = orch.log()
        assert len(llm.requests) == 2
    assert log.count("message cc:-1 failed (attempt") == 2
    assert second > first
    assert notice.notice
    assert notice.text.startswith(
        "[dead letter] a message from cc (event -1) failed 2 times and was set aside"
    )
    assert not replies.exists()


async def test_over_the_rate_a_message_is_refused_visibly_when_so_configured(tmp_path: Path) -> None:
    with FakeLLM([ModelReply("first answered")]) as llm:
        config = _console_config(
            tmp_path, llm.openai_base_url, rate_per_minute=1, burst=1, overflow="refuse", pairing=AS_CONTACT
        )
        with running(config):
            async with operator(tmp_path / "state") as session:
                await session.send(Say(id="m1", text="one"))
                first = await next_frame(session, Reply)
                await session.send(Say(id="m2", text="two"))
                second = await next_frame(session, Reply)
    assert (first.reply_to, first.text) == ("m1", "first answered")
    assert second.notice
    assert second.reply_to == "m2"
    assert second.text.startswith(
        "[rate limited] console takes 1 messages a minute; this one was not handled."
    )


async def test_over_the_rate_messages_wait_their_turn_and_are_all_answered_in_order(tmp_path: Path) -> None:
    script: list[ScriptItem] = [ModelReply(f"answer {i}") for i in range(3)]
    with FakeLLM(script) as llm:
        config = _console_config(
            tmp_path, llm.openai_base_url, rate_per_minute=600, burst=1, pairing=AS_CONTACT
        )
        with running(config) as orch:
            async with operator(tmp_path / "state") as session:
                for i in range(3):
                    await session.send(Say(id=f"m{i}", text=f"message {i}"))
                answers = [await next_frame(session, Reply) for _ in range(3)]
            log = orch.log()
    assert [(a.reply_to, a.text) for a in answers] == [(f"m{i}", f"answer {i}") for i in range(3)]
    assert "rate limit of console reached" in log
