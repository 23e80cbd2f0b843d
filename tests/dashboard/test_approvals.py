"""The Approvals page is one more approval surface: the first answer wins, a second click or a
stale page is refused with how the request ended, and contact text renders as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.permissions import ApprovalBroker
from tests.dashboard.support import BASE, dashboard
from tests.orchestrator.test_approvals import TOOL, Relay, _relays

pytestmark = pytest.mark.anyio
SCRIPT = '<script>window.pwned = 1</script><img src=x onerror="pwned=2">'


async def test_approve_from_the_page_decides_once_and_a_second_click_is_refused(tmp_path: Path) -> None:
    broker = ApprovalBroker(agent="nexo")
    relay = Relay("console")
    decisions: list[Any] = []
    async with dashboard(tmp_path, [broker]) as board:
        csrf = await board.login("ana")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    decisions.append(
                        await broker.ask(
                            TOOL, {"text": SCRIPT}, "call-1", _relays(relay), origin="console:bob"
                        )
                    )

                tg.start_soon(ask)
                await relay.shown.wait()
                listed = await board.client.get("/approvals")
                [request_id] = broker.open_requests
                assert f'id="approval-{request_id}"' in listed.text
                assert "notes__write" in listed.text
                assert "console:bob" in listed.text
                assert "<script>" not in listed.text.split("<main", 1)[1]
                assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in listed.text
                assert '<dl class="arguments"><dt>text</dt><dd>&lt;script&gt;' in listed.text
                form = {"csrf": csrf, "request_id": request_id, "behavior": "allow"}
                answered = await board.client.post("/approvals/answer", data=form, headers={"origin": BASE})
                assert answered.status_code == 200
                assert f"Approved: request {request_id}." in answered.text
                again = await board.client.post(
                    "/approvals/answer", data={**form, "behavior": "deny"}, headers={"origin": BASE}
                )
        assert again.status_code == 409
        assert f"request {request_id} was already answered: allowed by dashboard:ana" in again.text
        [decision] = decisions
        assert (decision.allowed, decision.reason) == (True, "approved by dashboard")
        assert relay.closings == [("allowed", "dashboard:ana")]
        stale = await board.client.post("/approvals/answer", data=form, headers={"origin": BASE})
        assert stale.status_code == 409
        assert "already answered: allowed by dashboard:ana" in stale.text
        unknown = await board.client.post(
            "/approvals/answer", data={**form, "request_id": "zzzzz"}, headers={"origin": BASE}
        )
        assert "no pending approval &#x27;zzzzz&#x27;" in unknown.text


async def test_an_empty_approvals_page_says_what_to_expect(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as board:
        await board.login()
        page = await board.client.get("/approvals")
    assert "No tool call is waiting for approval" in page.text
