"""Permission prompts as Block Kit buttons in the operator's DM; a press is the presser's answer."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

import httpx2
import pytest
from anyio import fail_after

from channel_servers.slack.approvals import SECTION_LIMIT, prompt_blocks
from channel_servers.slack.events_api import INTERACTIVITY_PATH
from shared.protocol.channel import PermissionRequestParams
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
)
from tests.channel_servers.slack.support import ANA, BEN, DM, slack_channel
from tests.channel_servers.support import ask, pull
from tests.fakes.slack_api import SIGNING_SECRET, FakeSlack

pytestmark = pytest.mark.anyio


async def test_a_prompt_shows_buttons_and_each_press_is_its_pressers_answer(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, approval_channel_ids=[DM]) as running:
        assert await ask(running.client) == 1
        prompt = fake.posted[0]
        fake.inject(fake.press(BEN, prompt, "nexo_allow", name="ben"), kind="interactive")
        fake.inject(fake.press(ANA, prompt, "nexo_deny", name="ana"), kind="interactive")
        events = await pull(running.client, count=2)
    blocks = prompt.params["blocks"]
    assert "*Approve workspace__write_file?*" in blocks[0]["text"]["text"]
    assert "&lt;notes.md&gt; &amp; more" in blocks[0]["text"]["text"]
    assert [(b["action_id"], b["value"]) for b in blocks[1]["elements"]] == [
        ("nexo_allow", "kmpqr"),
        ("nexo_deny", "kmpqr"),
    ]
    # The stranger's press reaches the orchestrator as *their* answer, which it refuses for
    # anyone who is not the binding's approver; the operator's is the operator's.
    assert [(event.kind, event.payload) for event in events] == [
        (
            "permission_verdict",
            {"request_id": "kmpqr", "behavior": "allow", "sender": BEN, "chat_id": DM, "sender_name": "ben"},
        ),
        (
            "permission_verdict",
            {"request_id": "kmpqr", "behavior": "deny", "sender": ANA, "chat_id": DM, "sender_name": "ana"},
        ),
    ]


async def test_a_settled_prompt_loses_its_buttons_and_foreign_presses_are_not_stored(tmp_path: Path) -> None:
    fake = FakeSlack()
    async with slack_channel(tmp_path, fake, approval_channel_ids=[DM]) as running:
        await ask(running.client)
        prompt = fake.posted[0]
        await running.client.session.send_request(
            PermissionClosedCall(
                params=PermissionClosedParams(
                    request_id="kmpqr", outcome="allowed", decided_by="slack:UANA0001 (ana)"
                )
            ),
            PermissionClosedResult,
        )
        stale = fake.press(ANA, prompt, "nexo_allow")
        stale["actions"][0]["value"] = "zzzzz"  # a prompt never asked here
        fake.inject(stale, kind="interactive")
        fake.inject(fake.press(ANA, prompt, "nexo_allow") | {"type": "view_submission"}, kind="interactive")
        with fail_after(5):
            await fake.all_acked()
        with_press = await pull(running.client, count=0)
        # The prompt message now says how it ended, without buttons.
        edits = await fake.posted_count(2)
    assert with_press == []
    assert (edits[1].method, edits[1].params["blocks"], edits[1].params["text"]) == (
        "chat.update",
        [],
        "Request `kmpqr`: approved by slack:UANA0001 (ana).",
    )


async def test_a_press_over_the_interactivity_url_is_verified_like_events(tmp_path: Path) -> None:
    fake = FakeSlack()
    settings = {
        "mode": "events",
        "signing_secret": SIGNING_SECRET,
        "events_port": 0,
        "approval_channel_ids": [DM],
    }
    async with slack_channel(tmp_path, fake, **settings) as running:
        await ask(running.client)
        press = fake.press(ANA, fake.posted[0], "nexo_allow")
        body = urlencode({"payload": json.dumps(press)}).encode()
        url = running.slack.events_url.replace("/slack/events", INTERACTIVITY_PATH)
        async with httpx2.AsyncClient() as http:
            _, forged = fake.signed_bytes(body, secret="someone else")
            refused = await http.post(url, content=body, headers=forged)
            _, genuine = fake.signed_bytes(body)
            accepted = await http.post(url, content=body, headers=genuine)
        events = await pull(running.client)
    assert [refused.status_code, accepted.status_code] == [401, 200]
    assert [(event.payload["sender"], event.payload["behavior"]) for event in events] == [(ANA, "allow")]


async def test_without_approval_channels_a_prompt_reaches_nobody(tmp_path: Path) -> None:
    async with slack_channel(tmp_path) as running:
        assert await ask(running.client) == 0
    assert running.fake.posted == []


def test_a_long_or_hostile_prompt_stays_one_valid_section() -> None:
    prompt = PermissionRequestParams(
        request_id="kmpqr",
        tool_name="workspace__write_file",
        description="**bold** " * 200,
        input_preview='{"text": "``` <!channel> **not bold**"}' + "x" * 5000,
    )
    [section, _] = prompt_blocks(prompt)
    text = section["text"]["text"]
    assert len(text) <= SECTION_LIMIT
    assert text.count("```") == 2
    assert "&lt;!channel&gt; **not bold**" in text
    assert text.endswith("`yes kmpqr` / `no kmpqr`.")
