"""A pairing approved or denied on the People page (or with `nexo pair ...`) through the control
socket withdraws the one-tap prompt the gate raised for the same request: the operator decides once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from orchestrator.intake.admission import PAIR_TOOL
from orchestrator.permissions import ApprovalBroker
from orchestrator.permissions.answers import pairing_prompt_call, withdraw_pairing_prompts
from tests.orchestrator.test_approvals import Relay, _relays

pytestmark = pytest.mark.anyio


async def _asked_then_settled(request: dict[str, Any], answer: dict[str, Any]) -> tuple[Any, Relay, bool]:
    broker, relay = ApprovalBroker(agent="nexo"), Relay("console")
    decisions: list[Any] = []

    async def ask() -> None:
        arguments = {"channel": "inbox", "sender": "u42", "name": "Bob"}
        decisions.append(await broker.ask(PAIR_TOOL, arguments, pairing_prompt_call("p-1"), _relays(relay)))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await relay.shown.wait()
            withdraw_pairing_prompts([broker], request, answer)
            still_listed = bool(broker.pending())
            if still_listed:
                broker.resolve(relay.asked[0], "allow", "channel:console")
    return decisions[0], relay, still_listed


async def test_approving_the_pairing_elsewhere_withdraws_its_one_tap_prompt() -> None:
    request = {"method": "nexo/pairing/approve", "params": {"pending_id": "p-1", "by": "dashboard:ana"}}
    answer = {"result": {"record": {}, "request": {"pending_id": "p-1"}}}
    decision, relay, still_listed = await _asked_then_settled(request, answer)
    assert (decision.allowed, decision.reason) == (
        False,
        "already allowed by dashboard:ana: nothing left to do",
    )
    assert relay.closings == [("allowed", "dashboard:ana")]
    assert not still_listed


async def test_a_pairing_approved_by_code_or_denied_withdraws_the_prompt_of_that_request_only() -> None:
    by_code = {"method": "nexo/pairing/approve", "params": {"code": "ABCD-1234", "by": "cli"}}
    decision, relay, _ = await _asked_then_settled(by_code, {"result": {"request": {"pending_id": "p-1"}}})
    assert (decision.reason, relay.closings) == (
        "already allowed by cli: nothing left to do",
        [("allowed", "cli")],
    )
    denied = {"method": "nexo/pairing/deny", "params": {"pending_id": "p-1", "by": "dashboard:ana"}}
    decision, relay, _ = await _asked_then_settled(denied, {"result": {"changed": True, "status": "denied"}})
    assert relay.closings == [("denied", "dashboard:ana")]
    for request, answer in (
        ({"method": "nexo/pairing/deny", "params": {"pending_id": "p-2", "by": "cli"}}, {"result": {}}),
        ({"method": "nexo/pairing/approve", "params": {"pending_id": "p-1"}}, {"error": "no such request"}),
        ({"method": "nexo/audit/tail", "params": {"pending_id": "p-1"}}, {"result": {}}),
    ):
        decision, relay, still_listed = await _asked_then_settled(request, answer)
        assert still_listed, request
        assert (decision.allowed, relay.closings) == (True, [("allowed", "console")])
