"""The control plane (``nexo/audit/...`` requests), through the MCP protocol in memory."""

from __future__ import annotations

from typing import Any, TypeVar

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from servers.audit.control import METHODS, as_mcp_error
from servers.audit.errors import WriterStopped
from servers.audit.server import build_server
from servers.audit.settings import AuditSettings
from shared.protocol.audit.entries import Entry, EntryDraft, VerifyReport
from shared.protocol.audit.goals import Budget, Origin
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    GoalBootParams,
    GoalBootRequest,
    GoalBootResult,
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
    GoalGetParams,
    GoalGetRequest,
    GoalGetResult,
    GoalListParams,
    GoalListRequest,
    GoalListResult,
    GoalMarkNotifiedParams,
    GoalMarkNotifiedRequest,
    GoalMarkNotifiedResult,
    GoalUpdateParams,
    GoalUpdateRequest,
    GoalUpdateResult,
    HeadParams,
    HeadRequest,
    HeadResult,
    TailParams,
    TailRequest,
    TailResult,
    TrimParams,
    TrimRequest,
    TrimResult,
    VerifyParams,
    VerifyRequest,
    VerifyResult,
)
from shared.protocol.audit.terms import GOAL_NOT_FOUND, TRANSITION_REFUSED
from tests.servers.audit.conftest import ManualClock, connected, notice, tool_call, turn

pytestmark = pytest.mark.anyio
R = TypeVar("R", bound=types.Result)
CHAT = Origin(source="channel:console", chat_id="operator")


async def ask(client: Client, request: types.Request[Any, Any], result: type[R]) -> R:
    return await client.session.send_request(request, result)


async def append(client: Client, *drafts: EntryDraft) -> AppendResult:
    return await ask(client, AppendRequest(params=AppendParams(entries=list(drafts))), AppendResult)


async def test_the_extension_is_advertised_in_both_protocol_eras(settings: AuditSettings) -> None:
    expected = {"methods": list(METHODS), "max_append": 500}
    async with Client(build_server(settings, clock=ManualClock())) as modern:
        extensions = modern.server_capabilities.extensions or {}
    async with Client(build_server(settings, clock=ManualClock()), mode="legacy") as legacy:
        experimental = legacy.server_capabilities.experimental or {}
    assert extensions["nexo/audit"] == expected
    assert experimental["nexo/audit"] == expected
    assert METHODS == (
        "nexo/audit/append",
        "nexo/audit/verify",
        "nexo/audit/head",
        "nexo/audit/tail",
        "nexo/audit/trim",
        "nexo/audit/goals/create",
        "nexo/audit/goals/update",
        "nexo/audit/goals/get",
        "nexo/audit/goals/list",
        "nexo/audit/goals/boot",
        "nexo/audit/goals/mark_notified",
    )


async def test_tail_reads_a_time_window_of_chosen_kinds_oldest_first_a_page_at_a_time(
    settings: AuditSettings,
) -> None:
    clock = ManualClock()
    async with connected(settings, clock) as client:
        await append(client, notice("before"), turn("g-1", 0))
        clock.advance(hours=1)
        window_start = clock.now
        await append(client, notice("a"), turn("g-1", 1), notice("b"), tool_call("g-1"), notice("c"))
        params = {"since_at": window_start, "kinds": ["notice", "tool_call"], "limit": 2}
        first = await ask(client, TailRequest(params=TailParams(**params)), TailResult)
        second = await ask(
            client, TailRequest(params=TailParams(**params, since_seq=first.entries[-1].seq)), TailResult
        )
        third = await ask(
            client, TailRequest(params=TailParams(**params, since_seq=second.entries[-1].seq)), TailResult
        )
    assert [e.subject or e.kind for e in first.entries] == ["a", "b"]
    assert [e.subject or e.kind for e in second.entries] == ["called time__now", "c"]
    assert third.entries == []


async def test_a_batch_is_appended_in_order_and_tail_reads_it_back(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        appended = await append(client, turn("g-1", 0), tool_call("g-1"), notice("tick"))
        tail = await ask(client, TailRequest(params=TailParams(goal_id="g-1")), TailResult)
        follow = await ask(client, TailRequest(params=TailParams(since_seq=2)), TailResult)
        head = await ask(client, HeadRequest(params=HeadParams()), HeadResult)
    assert [(a.seq, a.created) for a in appended.entries] == [(1, True), (2, True), (3, True)]
    assert [entry.seq for entry in tail.entries] == [1, 2]
    assert tail.entries[0] == Entry(
        seq=1,
        at="2026-11-21T12:00:00.000000+00:00",
        kind="turn",
        source="channel:console",
        agent="nexo",
        goal_id="g-1",
        subject="",
        body={
            "index": 0,
            "outcome": "answered",
            "decision": "decision 0",
            "tool_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "duration_ms": None,
            "model": None,
            "unattended": False,
        },
        prev_hash=tail.entries[0].prev_hash,
        hash=appended.entries[0].hash,
    )
    assert [entry.subject for entry in follow.entries] == ["tick"]
    assert (head.head.seq, head.head.hash) == (3, appended.entries[2].hash)


async def test_a_batch_with_one_bad_entry_is_refused_whole_with_the_reason(settings: AuditSettings) -> None:
    bad = EntryDraft(kind="tool_call", source="cli", body={"tool": "t"})
    async with connected(settings) as client:
        with pytest.raises(MCPError) as caught:
            await append(client, notice("fine"), bad)
        head = await ask(client, HeadRequest(params=HeadParams()), HeadResult)
    assert caught.value.code == types.INVALID_PARAMS
    assert caught.value.message == (
        "invalid tool_call body: args_sha256: Field required; duration_ms: Field required; "
        "outcome: Field required"
    )
    assert head.head.seq == 0


async def test_verify_reports_an_intact_chain_and_checks_an_expected_head(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        await append(client, notice("a"), notice("b"))
        head = (await ask(client, HeadRequest(params=HeadParams()), HeadResult)).head
        plain = await ask(client, VerifyRequest(params=VerifyParams()), VerifyResult)
        anchored = await ask(client, VerifyRequest(params=VerifyParams(expected_head=head)), VerifyResult)
    assert plain.report == VerifyReport(ok=True, checked=2, head=head, removed=0, checkpoints=0)
    assert anchored.report == plain.report


async def test_trim_takes_per_call_overrides_and_returns_the_checkpoint(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        await append(client, *(turn("g-1", index) for index in range(4)))
        trimmed = await ask(client, TrimRequest(params=TrimParams(turns_per_goal=1)), TrimResult)
        nothing = await ask(client, TrimRequest(params=TrimParams()), TrimResult)
        report = (await ask(client, VerifyRequest(params=VerifyParams()), VerifyResult)).report
    assert trimmed.checkpoint is not None
    assert (trimmed.removed, trimmed.checkpoint.seq, trimmed.checkpoint.kind) == (3, 5, "checkpoint")
    assert (nothing.removed, nothing.checkpoint) == (0, None)
    assert (report.ok, report.removed) == (True, 3)


async def test_goals_round_trip_through_the_control_plane(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        create = GoalCreateParams(id="g-chat", agent="nexo", kind="interactive", origin=CHAT, prompt="hi")
        created = await ask(client, GoalCreateRequest(params=create), GoalCreateResult)
        update = GoalUpdateParams(id="g-chat", phase="answering", budget=Budget(turns=1), last_event="msg")
        updated = await ask(client, GoalUpdateRequest(params=update), GoalUpdateResult)
        got = await ask(client, GoalGetRequest(params=GoalGetParams(id="g-chat")), GoalGetResult)
        listed = await ask(client, GoalListRequest(params=GoalListParams()), GoalListResult)
        boot = await ask(
            client, GoalBootRequest(params=GoalBootParams(resumable_kinds=["daemon"])), GoalBootResult
        )
        marked = await ask(
            client,
            GoalMarkNotifiedRequest(params=GoalMarkNotifiedParams(ids=["g-chat"])),
            GoalMarkNotifiedResult,
        )
        later = await ask(client, GoalBootRequest(params=GoalBootParams()), GoalBootResult)
    assert (created.created, created.goal.status) == (True, "running")
    assert (updated.goal.phase, updated.goal.budget.turns, updated.promoted) == ("answering", 1, [])
    assert got.goal == updated.goal
    assert (listed.goals, listed.running, listed.max_running) == ([updated.goal], 1, 4)
    assert [(g.id, g.status, g.origin) for g in boot.lost] == [("g-chat", "lost_on_restart", CHAT)]
    assert (boot.resumable, boot.promoted) == ([], [])
    assert (marked.marked, later.lost) == (1, [])


@pytest.mark.parametrize(
    ("request_", "code", "message"),
    [
        (
            GoalGetRequest(params=GoalGetParams(id="g-404")),
            GOAL_NOT_FOUND,
            "no goal 'g-404': list the goals with nexo/audit/goals/list",
        ),
        (
            GoalUpdateRequest(params=GoalUpdateParams(id="g-1", status="queued")),
            TRANSITION_REFUSED,
            "goal 'g-1' is running; it cannot become 'queued' "
            "(allowed: cancelled, done, failed, lost_on_restart, paused, sleeping)",
        ),
        (
            GoalCreateRequest(
                params=GoalCreateParams(agent="nexo", kind="bg", origin=Origin(source="?"), prompt="")
            ),
            types.INVALID_PARAMS,
            "origin.source '?' is not a source name: use e.g. 'channel:console', 'cron:c_ab12cd34ef', "
            "'cron:poller:main:inbox' or 'cli'",
        ),
    ],
)
async def test_refusals_come_back_as_json_rpc_errors_with_their_own_codes(
    settings: AuditSettings, request_: types.Request[Any, Any], code: int, message: str
) -> None:
    async with connected(settings) as client:
        await ask(
            client,
            GoalCreateRequest(
                params=GoalCreateParams(id="g-1", agent="nexo", kind="bg", origin=CHAT, prompt="p")
            ),
            GoalCreateResult,
        )
        with pytest.raises(MCPError) as caught:
            await ask(client, request_, GoalGetResult)
    assert (caught.value.code, caught.value.message) == (code, message)


def test_store_refusals_map_to_error_codes_and_anything_else_stays_internal() -> None:
    stopped = as_mcp_error(WriterStopped("stopping"))
    assert stopped is not None
    assert (stopped.code, stopped.message) == (types.INTERNAL_ERROR, "stopping")
    assert as_mcp_error(RuntimeError("bug")) is None


async def test_an_unexpected_failure_is_an_internal_error_not_a_false_report(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        await append(client, notice("a"))
        settings.database.unlink()
        for suffix in ("-wal", "-shm"):
            settings.database.with_name(settings.database.name + suffix).unlink(missing_ok=True)
        with pytest.raises(MCPError) as caught:
            await ask(client, VerifyRequest(params=VerifyParams()), VerifyResult)
    assert (caught.value.code, caught.value.message) == (types.INTERNAL_ERROR, "Internal server error")
