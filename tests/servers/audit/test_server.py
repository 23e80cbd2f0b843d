"""The model-facing tools of the audit server, through the MCP protocol in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client

from servers.audit.settings import AuditSettings
from shared.protocol.audit.bodies import NoticeBody
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.audit.goals import Origin
from shared.protocol.audit.methods import (
    AppendParams,
    AppendRequest,
    AppendResult,
    GoalCreateParams,
    GoalCreateRequest,
    GoalCreateResult,
    TailParams,
    TailRequest,
    TailResult,
)
from shared.protocol.policy import READ_ONLY_HINTS as READ_ONLY
from shared.protocol.policy import reads_private_data
from tests.servers.audit.conftest import connected, notice, opened_ledger, tool_call, turn

pytestmark = pytest.mark.anyio


async def append(client: Client, *drafts: EntryDraft) -> None:
    await client.session.send_request(AppendRequest(params=AppendParams(entries=list(drafts))), AppendResult)


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


async def call(client: Client, tool: str, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool(tool, arguments)


async def test_the_server_offers_two_read_only_tools_and_no_control_methods_as_tools(
    settings: AuditSettings,
) -> None:
    async with connected(settings) as client:
        tools = (await client.list_tools()).tools
    assert [(tool.name, tool.annotations) for tool in tools] == [
        ("agent_turns_tail", READ_ONLY),
        ("audit_search", READ_ONLY),
    ]
    assert READ_ONLY.read_only_hint is True
    assert {tool.name: reads_private_data(tool.meta) for tool in tools} == {
        "agent_turns_tail": True,
        "audit_search": True,
    }


async def test_agent_turns_tail_renders_the_last_turns_as_a_markdown_table(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        await append(
            client,
            turn("g-1", 0, outcome="tool_calls", decision="look up | the weather\nfirst"),
            tool_call("g-1"),
            turn("g-1", 1, decision="x" * 300),
            turn("g-2", 0),
            turn("g-1", 2, outcome="done", decision="It is sunny."),
        )
        result = await call(client, "agent_turns_tail", goal_id="g-1", n=2)
        everything = await call(client, "agent_turns_tail", goal_id="g-1")
    assert text_of(result) == "\n".join(
        [
            "Last 2 turns of goal g-1:",
            "",
            "| # | time (UTC) | outcome | decision / summary | source |",
            "|---|---|---|---|---|",
            f"| 1 | 2026-11-21 12:00:00 | answered | {'x' * 159}… | channel:console |",
            "| 2 | 2026-11-21 12:00:00 | done | It is sunny. | channel:console |",
        ]
    )
    assert "| 0 | 2026-11-21 12:00:00 | tool_calls | look up \\| the weather first | channel:console |" in (
        text_of(everything)
    )


async def test_a_goal_known_only_to_the_registry_has_no_turns_yet(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        params = GoalCreateParams(
            id="g-new", agent="nexo", kind="bg", origin=Origin(source="cli"), prompt="p"
        )
        await client.session.send_request(GoalCreateRequest(params=params), GoalCreateResult)
        result = await call(client, "agent_turns_tail", goal_id="g-new")
    assert (result.is_error, text_of(result)) == (False, "Goal g-new has no recorded turns yet.")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"goal_id": "g-404"},
            "no goal 'g-404' is known to the audit ledger. Use the goal id from your goal context, or "
            "find one with audit_search(query=..., kind='goal').",
        ),
    ],
)
async def test_agent_turns_tail_explains_bad_arguments(
    settings: AuditSettings, arguments: dict[str, Any], message: str
) -> None:
    async with connected(settings) as client:
        await append(client, turn("g-1", 0))
        result = await call(client, "agent_turns_tail", **arguments)
    assert (result.is_error, text_of(result)) == (True, f"Error executing tool agent_turns_tail: {message}")


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        ({"goal_id": "g-1", "n": 0}, "- n: expected greater than or equal to 1; got 0"),
        ({"goal_id": "g-1", "n": 201}, "- n: expected less than or equal to 200; got 201"),
    ],
)
async def test_agent_turns_tail_refuses_n_outside_its_bounds_before_running(
    settings: AuditSettings, arguments: dict[str, Any], line: str
) -> None:
    async with connected(settings) as client:
        result = await call(client, "agent_turns_tail", **arguments)
    assert (result.is_error, text_of(result)) == (True, f"invalid arguments for agent_turns_tail:\n{line}")


async def test_audit_search_returns_matching_entries_newest_first_with_a_body_preview(
    settings: AuditSettings,
) -> None:
    async with connected(settings) as client:
        await append(client, tool_call("g-1", "memory__search"), notice("memory is full"))
        await append(client, tool_call("g-2", "memory__search", outcome="denied"))
        both = await call(client, "audit_search", query="memory__search")
        filtered = await call(client, "audit_search", query="memory", kind="notice", source="heartbeat")
        one_goal = await call(client, "audit_search", query="memory__search", goal_id="g-1", limit=1)
    digest = tool_call(None).body["args_sha256"]
    assert both.structured_content == {
        "hits": [
            {
                "seq": 3,
                "at": "2026-11-21T12:00:00.000002+00:00",
                "kind": "tool_call",
                "source": "channel:console",
                "agent": "nexo",
                "goal_id": "g-2",
                "subject": "called memory__search",
                "body": f'{{"args_sha256":"{digest}","call_id":null,"duration_ms":2.5,"error":null,'
                '"outcome":"denied","tool":"memory__search"}',
            },
            {
                "seq": 1,
                "at": "2026-11-21T12:00:00.000000+00:00",
                "kind": "tool_call",
                "source": "channel:console",
                "agent": "nexo",
                "goal_id": "g-1",
                "subject": "called memory__search",
                "body": f'{{"args_sha256":"{digest}","call_id":null,"duration_ms":2.5,"error":null,'
                '"outcome":"ok","tool":"memory__search"}',
            },
        ]
    }
    assert [hit["seq"] for hit in (filtered.structured_content or {})["hits"]] == [2]
    assert [hit["seq"] for hit in (one_goal.structured_content or {})["hits"]] == [1]


async def test_audit_search_shortens_long_bodies(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        body = NoticeBody(level="info", message="word " * 200)
        await append(client, EntryDraft.of(body, source="heartbeat", subject="long"))
        result = await call(client, "audit_search", query="long")
    [hit] = (result.structured_content or {})["hits"]
    assert (len(hit["body"]), hit["body"][-1]) == (400, "…")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": "  "}, "query '  ' is empty: pass words to look for, e.g. 'memory_search denied'"),
        (
            {"query": "x", "kind": "mail"},
            "unknown kind 'mail': use one of turn, tool_call, approval_requested, approval_answered, "
            "pairing, channel, cron_fire, memory_promotion, config_change, goal, notice, checkpoint, "
            "spend_reserved, or omit it",
        ),
    ],
)
async def test_audit_search_explains_bad_arguments(
    settings: AuditSettings, arguments: dict[str, Any], message: str
) -> None:
    async with connected(settings) as client:
        result = await call(client, "audit_search", **arguments)
    assert (result.is_error, text_of(result)) == (True, f"Error executing tool audit_search: {message}")


async def test_audit_search_refuses_a_limit_above_its_bound(settings: AuditSettings) -> None:
    async with connected(settings) as client:
        result = await call(client, "audit_search", query="x", limit=101)
    assert (result.is_error, text_of(result)) == (
        True,
        "invalid arguments for audit_search:\n- limit: expected less than or equal to 100; got 101",
    )


async def test_retention_runs_when_the_server_starts(tmp_path: Path) -> None:
    settings = AuditSettings(state_dir=tmp_path, turns_per_goal=1, trim_interval_s=3600)
    async with opened_ledger(settings.database) as ledger:
        await ledger.append([turn("g-1", 0), turn("g-1", 1)])
    async with connected(settings) as client:
        with anyio.fail_after(10):
            checkpoints: list[Any] = []
            while not checkpoints:
                tail = await client.session.send_request(
                    TailRequest(params=TailParams(kind="checkpoint")), TailResult
                )
                checkpoints = tail.entries
    assert [(c.seq, c.body["removed"]) for c in checkpoints] == [(3, 1)]
