"""Approving from the phone: Approve / Deny buttons to the approval numbers, presses and typed answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.protocol.channel import PermissionRequestParams
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
    PermissionRequestAccepted,
    PermissionRequestCall,
)
from tests.channel_servers.whatsapp.conftest import CONTACT, OPERATOR, Running, running

pytestmark = pytest.mark.anyio

PROMPT = PermissionRequestParams(
    request_id="kmpqr",
    tool_name="workspace__run",
    description="Run a shell command",
    input_preview='{"command": "ls"}',
)


async def ask(wa: Running, prompt: PermissionRequestParams = PROMPT) -> int:
    call = PermissionRequestCall(params=prompt.model_dump(by_alias=True))
    return (await wa.client.session.send_request(call, PermissionRequestAccepted)).delivered


async def verdicts(wa: Running) -> list[tuple[str, dict[str, Any]]]:
    return [(e.dedupe_key, e.payload) for e in await wa.pull() if e.kind == "permission_verdict"]


async def test_a_prompt_shows_approve_and_deny_buttons_to_the_approval_number(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes(wa_id=OPERATOR)
        delivered = await ask(wa)
    assert delivered == 1
    assert [(m["to"], m["interactive"]) for m in wa.fake.messages("interactive")] == [
        (
            OPERATOR,
            {
                "type": "button",
                "body": {
                    "text": 'nexo asks to run *workspace__run*: Run a shell command\n\n{"command": "ls"}'
                    "\n\nOr reply yes kmpqr / no kmpqr."
                },
                "action": {
                    "buttons": [
                        {"type": "reply", "reply": {"id": "nexo:allow:kmpqr", "title": "Approve"}},
                        {"type": "reply", "reply": {"id": "nexo:deny:kmpqr", "title": "Deny"}},
                    ]
                },
            },
        )
    ]


async def test_outside_the_window_the_prompt_goes_as_the_template_or_not_at_all(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        unseen = await ask(wa)
    async with running(tmp_path / "templated", notice_template="nexo_notice") as templated:
        seen = await ask(templated)
    assert (unseen, wa.fake.messages()) == (0, [])
    assert seen == 1
    assert [m["template"]["components"][0]["parameters"][0]["text"] for m in templated.fake.messages()] == [
        'nexo asks to run *workspace__run*: Run a shell command {"command": "ls"} '
        "Or reply yes kmpqr / no kmpqr."
    ]


async def test_a_button_press_is_a_verdict_from_the_presser_wa_id(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes(wa_id=OPERATOR)
        await ask(wa)
        press = wa.fake.button_reply(
            OPERATOR, "nexo:allow:kmpqr", "Approve", name="Op", message_id="wamid.P1"
        )
        other = wa.fake.button_reply(CONTACT, "nexo:deny:kmpqr", "Deny", name="Op", message_id="wamid.P2")
        statuses = [*(await wa.deliver(press, times=2)), *(await wa.deliver(other))]
        found = await verdicts(wa)
        messages = [e for e in await wa.pull() if e.kind == "message"]
    assert statuses == [200, 200, 200]
    assert found == [
        (
            f"permission_verdict:kmpqr:{OPERATOR}",
            {
                "request_id": "kmpqr",
                "behavior": "allow",
                "sender": OPERATOR,
                "sender_name": "Op",
                "chat_id": OPERATOR,
            },
        ),
        (
            f"permission_verdict:kmpqr:{CONTACT}",
            {
                "request_id": "kmpqr",
                "behavior": "deny",
                "sender": CONTACT,
                "sender_name": "Op",
                "chat_id": CONTACT,
            },
        ),
    ]
    assert [e.payload["content"] for e in messages] == ["hi"]


async def test_a_press_on_a_prompt_that_is_not_open_is_not_stored(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.deliver(wa.fake.button_reply(OPERATOR, "nexo:allow:kmpqr", "Approve"))
        await wa.deliver(wa.fake.button_reply(OPERATOR, "nexo:allow:../etc", "Approve"))
        events = await wa.pull()
    assert [e.payload["content"] for e in events] == ["Approve"]


async def test_the_strict_typed_answer_still_works(tmp_path: Path) -> None:
    async with running(tmp_path) as wa:
        await wa.contact_writes(wa_id=OPERATOR)
        await ask(wa)
        await wa.deliver(wa.fake.text(OPERATOR, "no kmpqr"))
        found = await verdicts(wa)
    assert [(payload["behavior"], payload["sender"]) for _, payload in found] == [("deny", OPERATOR)]


async def test_a_settled_prompt_gets_a_follow_up_naming_who_decided(tmp_path: Path) -> None:
    closing = PermissionClosedCall(
        params=PermissionClosedParams(
            request_id="kmpqr", outcome="allowed", decided_by=f"whatsapp:{OPERATOR} (Op)"
        )
    )
    async with running(tmp_path) as wa:
        await wa.contact_writes(wa_id=OPERATOR)
        await ask(wa)
        first = await wa.client.session.send_request(closing, PermissionClosedResult)
        again = await wa.client.session.send_request(closing, PermissionClosedResult)
    assert (first.closed, again.closed) == (True, False)
    assert [(m["to"], m["text"]["body"]) for m in wa.fake.messages("text")] == [
        (OPERATOR, f"Approved by whatsapp:{OPERATOR} (Op) (kmpqr).")
    ]
