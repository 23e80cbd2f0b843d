"""The approval broker: first answer wins, only from where it asked, single use, timeout is deny."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest

from orchestrator.mesh import CatalogTool, ServerConnection
from orchestrator.permissions import ApprovalBroker, decider
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedResult,
    PermissionRequestAccepted,
)

pytestmark = pytest.mark.anyio
TOOL = CatalogTool("notes", "write", "notes__write", "Write a note", {}, read_only=False, destructive=False)


@dataclass
class Relay:
    """A channel server as the broker sees it: it shows the prompt on ``screens`` chats."""

    name: str
    screens: int = 1
    fail: bool = False
    asked: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    closings: list[tuple[str | None, str | None]] = field(default_factory=list)
    """(outcome, decided_by) of each close, as the channel reads them."""
    shown: anyio.Event = field(default_factory=anyio.Event)

    async def request(self, request: Any, result_type: type, *, timeout: float) -> Any:
        if self.fail:
            raise ConnectionError("gone")
        if isinstance(request, PermissionClosedCall):
            self.closed.append(request.params.request_id)
            self.closings.append((request.params.outcome, request.params.decided_by))
            return PermissionClosedResult(closed=True)
        self.asked.append(request.params.request_id)
        self.shown.set()
        return PermissionRequestAccepted(delivered=self.screens)


def _relays(*relays: Relay) -> list[ServerConnection]:
    return cast(list[ServerConnection], list(relays))


async def _ask_and_answer(
    broker: ApprovalBroker, relays: list[Relay], *answers: tuple[str, str]
) -> tuple[Any, list[bool]]:
    results: list[bool] = []
    decision: list[Any] = []

    async def ask() -> None:
        decision.append(await broker.ask(TOOL, {"text": "x"}, "call-1", _relays(*relays)))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await relays[0].shown.wait()
            request_id = relays[0].asked[0]
            for behavior, source in answers:
                results.append(broker.resolve(request_id, behavior, source))  # type: ignore[arg-type]
    return decision[0], results


async def test_the_first_answer_wins_and_the_id_is_single_use() -> None:
    broker = ApprovalBroker(timeout_s=5)
    decision, results = await _ask_and_answer(
        broker, [Relay("console"), Relay("phone")], ("allow", "channel:phone"), ("deny", "channel:console")
    )
    assert (decision.allowed, decision.reason) == (True, "approved by channel:phone")
    assert results == [True, False]
    assert broker.open_requests == []


async def test_an_answer_from_a_channel_that_was_not_asked_does_not_count() -> None:
    broker = ApprovalBroker(timeout_s=5)
    decision, results = await _ask_and_answer(
        broker, [Relay("console")], ("allow", "channel:stranger"), ("deny", "channel:console")
    )
    assert results == [False, True]
    assert not decision.allowed
    assert "the operator denied notes__write" in decision.reason


async def test_an_unreachable_relay_cannot_answer_and_nobody_to_ask_is_a_deny() -> None:
    broker = ApprovalBroker(timeout_s=5)
    decision, results = await _ask_and_answer(
        broker,
        [Relay("console"), Relay("down", fail=True)],
        ("allow", "channel:down"),
        ("allow", "channel:console"),
    )
    assert results == [False, True]
    assert decision.allowed
    alone = await broker.ask(TOOL, {}, "call-2", _relays(Relay("empty", screens=0)))
    assert (alone.allowed, alone.reason) == (
        False,
        "notes__write needs approval and no operator is connected (open `nexo chat`)",
    )


async def test_no_answer_before_the_timeout_is_a_deny() -> None:
    broker = ApprovalBroker(timeout_s=0.05)
    decision = await broker.ask(TOOL, {}, "call-3", _relays(Relay("console")))
    assert (decision.allowed, decision.reason) == (False, "no answer within 0.05s: treated as deny")
    assert not broker.resolve("zzzzz", "allow", "channel:console")


async def test_a_settled_request_is_closed_where_it_was_shown_and_a_late_answer_learns_how_it_ended() -> None:
    broker = ApprovalBroker(timeout_s=5)
    console, phone, down = Relay("console"), Relay("phone"), Relay("down", fail=True)
    decision, results = await _ask_and_answer(
        broker, [console, phone, down], ("allow", "channel:phone"), ("deny", "channel:console")
    )
    request_id = console.asked[0]
    timed_out, unanswered = ApprovalBroker(timeout_s=0.05), Relay("console")
    await timed_out.ask(TOOL, {}, "call-4", _relays(unanswered))
    (expired,) = unanswered.asked
    assert (decision.allowed, results) == (True, [True, False])
    assert (console.closed, phone.closed, down.closed) == ([request_id], [request_id], [])
    assert broker.settled(request_id) == "allowed by channel:phone"
    assert timed_out.settled(expired) == "timed out"
    assert broker.settled("zzzzz") is None


async def test_a_close_tells_the_channels_the_outcome_and_who_decided() -> None:
    broker = ApprovalBroker(timeout_s=5)
    phone, console = Relay("phone"), Relay("console")

    async def ask_answered(behavior: str, source: str, who: str, call_id: str) -> None:
        async def ask() -> None:
            await broker.ask(TOOL, {}, call_id, _relays(phone, console))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                phone.shown = anyio.Event()
                tg.start_soon(ask)
                await phone.shown.wait()
                broker.resolve(phone.asked[-1], behavior, source, who)  # type: ignore[arg-type]

    await ask_answered("allow", "channel:phone", "phone:12345 (Ana)", "call-1")
    await ask_answered("deny", "channel:console", "", "call-2")
    timed_out = ApprovalBroker(timeout_s=0.01)
    unanswered = Relay("console")
    await timed_out.ask(TOOL, {}, "call-3", _relays(unanswered))
    assert phone.closings == console.closings == [("allowed", "phone:12345 (Ana)"), ("denied", "console")]
    assert unanswered.closings == [("expired", None)]
    nobody = Relay("empty", screens=0)
    await timed_out.ask(TOOL, {}, "call-4", _relays(nobody))
    assert nobody.closings == [("cancelled", None)]


async def test_a_prompt_whose_goal_is_cancelled_closes_as_cancelled() -> None:
    broker = ApprovalBroker(timeout_s=5)
    relay = Relay("phone")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.ask, TOOL, {}, "call-1", _relays(relay))
            await relay.shown.wait()
            tg.cancel_scope.cancel()
    assert relay.closings == [("cancelled", None)]


def test_who_decided_is_the_channel_sender_and_name_printable_and_short() -> None:
    assert decider("telegram", "12345", "Ana") == "telegram:12345 (Ana)"
    assert decider("console") == "console"
    assert decider("whatsapp", "4915", None) == "whatsapp:4915"
    long = decider("x", "1", "evil\nname" + "a" * 300)
    assert (long[:14], len(long), set(long[14:])) == ("x:1 (evil name", 120, {"a"})
