"""The Slack channel in a running mesh: a thread keeps its session, with its history, across a
restart of the orchestrator (its transcript is in the memory server), and the answer lands in the
same thread; a tool call is approved by the operator's Block Kit button press, and a press by
anybody else is refused. Slack is the stand-in, served
from a thread of the test so the blocking mesh helpers can wait while it answers."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.fakes.llm import CallTool, FakeLLM, ScriptItem
from tests.fakes.llm import Reply as ModelReply
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack, Posted
from tests.mesh.harness import python_server, running, write_config

pytestmark = pytest.mark.scenario

OPERATOR = "UANA0001"
STRANGER = "UBEN0001"
DM = "D0000001"
GENERAL = "C0000001"
ROOT = "1700000000.000100"


@contextmanager
def stand_in() -> Iterator[tuple[FakeSlack, BlockingPortal]]:
    fake = FakeSlack()
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(fake.serve()):
        yield fake, portal


def config_for(tmp_path: Path, llm_url: str, api_url: str, notes: Path) -> Path:
    slack_env = {
        "NEXO_SLACK_APPROVAL_CHANNEL_IDS": json.dumps([DM]),
        "NEXO_SLACK_BOT_TOKEN": BOT_TOKEN,
        "NEXO_SLACK_APP_TOKEN": APP_TOKEN,
        "NEXO_SLACK_API_BASE_URL": api_url,
    }
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=llm_url,
        servers={
            "slack": python_server("channel_servers.slack", env=slack_env),
            "pairing": python_server("servers.pairing"),
            "memory": python_server("servers.memory"),
            "notes": python_server("tests.fakes.notes_server", env={"NOTES_FILE": str(notes)}),
        },
        agent={"channels": ["slack"]},
        extra={
            "channel_options": {
                "slack": {
                    "rate_per_minute": None,
                    "approval_timeout_s": 120,
                    "pairing": {
                        "platform": "slack",
                        "policy": "pairing",
                        "group_policy": "open",
                        "allow_from": [OPERATOR],
                    },
                }
            }
        },
    )


def posted(fake: FakeSlack, portal: BlockingPortal, count: int, log: Callable[[], str]) -> list[Posted]:
    """The first ``count`` messages the app posted, waiting (bounded) for them."""

    async def wait() -> list[Posted]:
        with anyio.move_on_after(60):
            await fake.posted_count(count)
        return list(fake.posted)

    found = portal.call(wait)
    assert len(found) >= count, log()
    return found


def mention(text: str, ts: str) -> dict[str, object]:
    return {
        "type": "app_mention",
        "channel": GENERAL,
        "user": OPERATOR,
        "text": f"<@UBOT0001> {text}",
        "ts": ts,
        "thread_ts": ROOT,
    }


def test_a_thread_keeps_its_session_across_a_restart_and_only_the_approver_can_press_approve(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    script: list[ScriptItem] = [
        ModelReply("noted: kiwi"),
        ModelReply("the code word is kiwi"),
        CallTool("notes__write_note", {"text": "buy milk"}),
        ModelReply("written"),
    ]
    with stand_in() as (fake, portal), FakeLLM(script) as llm:
        config = config_for(tmp_path, llm.openai_base_url, fake.base_url, notes)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server slack ready", timeout=60)
            portal.call(fake.inject, mention("the code word is kiwi", ROOT))
            first = posted(fake, portal, 1, orch.log)
        with running(config, timeout=120) as orch:
            orch.wait_for_line("server slack ready", timeout=60)
            portal.call(fake.inject, mention("what is the code word?", "1700000000.000300"))
            both = posted(fake, portal, 2, orch.log)[:2]

            # The operator's request needs approval: Block Kit buttons in the operator's DM.
            portal.call(
                fake.inject,
                {
                    "type": "message",
                    "channel": DM,
                    "channel_type": "im",
                    "user": OPERATOR,
                    "text": "note: buy milk",
                    "ts": "1700000000.000500",
                },
            )
            prompt = posted(fake, portal, 3, orch.log)[2]
            portal.call(
                functools.partial(fake.inject, fake.press(STRANGER, prompt, "nexo_allow"), kind="interactive")
            )
            orch.wait_for_line("not an approver", timeout=60)
            approve = fake.press(OPERATOR, prompt, "nexo_allow", name="ana")
            portal.call(functools.partial(fake.inject, approve, kind="interactive"))
            orch.wait_for_line("notes__write_note", timeout=60)
            after = posted(fake, portal, 6, orch.log)
    assert [(p.params["channel"], p.params.get("thread_ts"), p.params["text"]) for p in both] == [
        (GENERAL, ROOT, "noted: kiwi"),
        (GENERAL, ROOT, "the code word is kiwi"),
    ]
    assert first[0].ts == both[0].ts
    assert prompt.params["channel"] == DM
    assert notes.read_text() == "buy milk\n"
    texts = [(p.method, str(p.params.get("text"))) for p in after[3:]]
    assert ("chat.postMessage", "written") in texts
    assert any(method == "chat.update" and "approved" in text for method, text in texts), texts
    assert any(text.startswith("[refused]") for _, text in texts), texts
    second_turn = json.dumps(llm.requests[1].body)
    assert "the code word is kiwi" in second_turn  # the first turn, from the session's history
    assert "noted: kiwi" in second_turn
