"""The policy gate: run, notify, ask through the broker, or deny, as the policy decides."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from orchestrator.loop.tools import Decision
from orchestrator.mesh import CatalogTool
from orchestrator.permissions import (
    ApprovalBroker,
    OperatorGate,
    PermissionPolicy,
    PolicyEngine,
    PolicyGate,
)
from orchestrator.permissions.claude_relay import Relay

pytestmark = pytest.mark.anyio

SEARCH = CatalogTool("notes", "search", "notes__search", "", {}, read_only=True, destructive=False)
WRITE = CatalogTool(
    "notes",
    "write",
    "notes__write",
    "Write a note",
    {},
    read_only=False,
    destructive=False,
    classification="write",
)


@dataclass
class FakeBroker:
    """Answers every approval with ``answer`` and records what it was asked."""

    answer: Decision = field(default_factory=lambda: Decision(True, "approved by channel:console"))
    asked: list[tuple[str, dict[str, Any], str, list[Any]]] = field(default_factory=list)

    async def ask(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        call_id: str,
        relays: Sequence[Relay],
        *,
        origin: str = "",
    ) -> Decision:
        self.asked.append((tool.qualified, dict(arguments), call_id, list(relays)))
        return self.answer


@dataclass
class Notices:
    lines: list[str] = field(default_factory=list)
    fail: bool = False

    async def __call__(self, line: str) -> None:
        if self.fail:
            raise ConnectionError("channel gone")
        self.lines.append(line)


RELAYS: list[Any] = ["console-relay"]


def _gate(broker: FakeBroker, notices: Notices | None = None, **policy: Any) -> PolicyGate:
    engine = PolicyEngine(PermissionPolicy.model_validate(policy))
    return PolicyGate(broker, lambda: RELAYS, engine, notify=notices)


async def test_a_safe_tool_runs_without_asking() -> None:
    broker = FakeBroker()
    assert await _gate(broker).check(SEARCH, {"q": "x"}, "c1") == Decision(True, "notes__search is tier safe")
    assert broker.asked == []


async def test_a_confirm_tool_is_asked_through_the_broker_with_the_relays() -> None:
    broker = FakeBroker(answer=Decision(False, "the operator denied notes__write (request abcde)"))
    decision = await _gate(broker).check(WRITE, {"text": "hi"}, "call-7")
    assert decision == Decision(False, "the operator denied notes__write (request abcde)")
    assert broker.asked == [("notes__write", {"text": "hi"}, "call-7", ["console-relay"])]


async def test_a_notify_tool_runs_and_tells_the_operator_in_one_line() -> None:
    broker, notices = FakeBroker(), Notices()
    gate = _gate(broker, notices, tiers={"write": "notify"})
    decision = await gate.check(WRITE, {"text": "two\nlines"}, "c1")
    assert decision == Decision(True, "notes__write is tier notify: it runs and the operator is told")
    assert notices.lines == ['nexo is running notes__write {"text":"two\\nlines"}']
    assert broker.asked == []


async def test_a_failing_notice_is_logged_and_the_tool_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    gate = _gate(FakeBroker(), Notices(fail=True), tiers={"write": "notify"})
    with caplog.at_level(logging.WARNING, logger="nexo.permissions"):
        decision = await gate.check(WRITE, {}, "c1")
    assert decision.allowed is True
    assert [r.getMessage() for r in caplog.records] == [
        "could not tell the operator 'nexo is running notes__write {}': channel gone"
    ]


async def test_a_notify_tier_without_a_notifier_still_runs() -> None:
    assert (await _gate(FakeBroker(), None, tiers={"write": "notify"}).check(WRITE, {}, "c1")).allowed


async def test_a_denied_call_never_reaches_the_broker() -> None:
    broker = FakeBroker()
    decision = await _gate(broker, denied_tools=["notes__write"]).check(WRITE, {}, "c1")
    assert decision == Decision(False, "notes__write is denied by permissions.denied_tools ('notes__write')")
    assert broker.asked == []


async def test_for_turn_keeps_the_policy_and_makes_asks_denials_when_unattended() -> None:
    broker, notices = FakeBroker(), Notices()
    gate = _gate(
        broker, notices, rate_limits={"write": {"per_minute": 1, "burst": 1}}, tiers={"write": "notify"}
    )
    unattended = gate.for_turn(True)
    assert (unattended.engine, unattended.unattended, gate.unattended) == (gate.engine, True, False)
    assert (await unattended.check(WRITE, {}, "c1")).allowed is True
    assert notices.lines == ["nexo is running notes__write {}"]
    # One bucket for both gates: the attended turn sees the token the unattended one took.
    assert await gate.check(WRITE, {}, "c2") == Decision(
        False, "rate limited: 1 per minute (write); try again later"
    )
    strict = _gate(broker).for_turn(True)
    denied = await strict.check(WRITE, {}, "c3")
    assert not denied.allowed
    assert denied.reason.startswith("unattended turn: notes__write needs approval;")
    assert broker.asked == []
    live = _gate(broker).for_turn(True, approval_live=True)
    assert (await live.check(WRITE, {}, "c4")).allowed is True
    assert [call[2] for call in broker.asked] == ["c4"]


async def test_the_operator_gate_keeps_its_old_constructor_and_behaviour() -> None:
    assert OperatorGate is PolicyGate
    broker = FakeBroker()
    gate = OperatorGate(broker, lambda: RELAYS)
    assert (await gate.check(SEARCH, {}, "c1")).allowed is True
    unclassified = CatalogTool("misc", "thing", "misc__thing", "", {}, read_only=False, destructive=True)
    assert await gate.check(unclassified, {"a": 1}, "c2") == Decision(True, "approved by channel:console")
    assert [call[0] for call in broker.asked] == ["misc__thing"]


async def test_with_the_real_broker_and_nobody_connected_an_ask_is_a_deny() -> None:
    gate = PolicyGate(ApprovalBroker(timeout_s=5), list)
    with anyio.fail_after(5):
        decision = await gate.check(WRITE, {"text": "x"}, "c1")
    assert decision == Decision(
        False, "notes__write needs approval and no operator is connected (open `nexo chat`)"
    )
