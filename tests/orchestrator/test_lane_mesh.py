"""The control lane on the real mesh: forked audit and cron servers answer control requests on it
exactly as their SDK sessions answer the same requests, alongside tool calls, and a server killed
under a lane request is a ServerUnavailable like any other."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from orchestrator.mesh import Mesh, ServerConnection, ServerUnavailable, StdioServerConfig
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
    GoalUpdateParams,
    GoalUpdateRequest,
    GoalUpdateResult,
    TailParams,
    TailRequest,
    TailResult,
)
from shared.protocol.audit.terms import GOAL_NOT_FOUND
from shared.protocol.events import PullParams, PullRequest, PullResult
from tests.mesh.harness import child_pids

pytestmark = [pytest.mark.anyio, pytest.mark.scenario]


def built_in(module: str) -> StdioServerConfig:
    return StdioServerConfig(transport="stdio", command=sys.executable, args=["-m", module])


@asynccontextmanager
async def forked(tmp_path: Path, *modules: str) -> AsyncIterator[Mesh]:
    """The mesh forks built-in servers when it starts two or more of them."""
    servers = {module.rpartition(".")[2]: built_in(module) for module in modules}
    async with Mesh(servers, base_env={"NEXO_STATE_DIR": str(tmp_path)}, fork_server=True) as mesh:
        assert await mesh.wait_ready(60) == []
        yield mesh


async def on_sdk(connection: ServerConnection, request: types.Request[Any, Any], result: type[Any]) -> Any:
    """The same request through the connection's SDK session (the path without the lane)."""
    client = connection.client
    assert client is not None
    return await client.session.send_request(request, result)


def draft(i: int) -> EntryDraft:
    body = NoticeBody(level="info", message=f"note {i}")
    return EntryDraft.of(body, source="test", agent="main", goal_id="g-lane")


def number(entry: Any) -> int:
    return int(entry.body["message"].removeprefix("note "))


async def outcome(call: Any) -> tuple[int, str] | None:
    try:
        await call
    except MCPError as exc:
        return exc.error.code, exc.error.message
    return None


async def test_a_forked_server_answers_on_the_lane_what_its_sdk_session_answers(tmp_path: Path) -> None:
    async with forked(tmp_path, "servers.audit", "servers.time") as mesh:
        audit = mesh["audit"]
        assert audit.on_lane
        appended = await audit.request(
            AppendRequest(params=AppendParams(entries=[draft(i) for i in range(3)])), AppendResult, timeout=10
        )
        tail = TailRequest(params=TailParams(goal_id="g-lane", limit=10))
        lane_tail = await audit.request(tail, TailResult, timeout=10)
        sdk_tail = await on_sdk(audit, tail, TailResult)
        created = await audit.request(
            GoalCreateRequest(
                params=GoalCreateParams(
                    id="g-lane", agent="main", kind="interactive", origin=Origin(source="test"), prompt="hi"
                )
            ),
            GoalCreateResult,
            timeout=10,
        )
        missing = GoalUpdateRequest(params=GoalUpdateParams(id="g-nobody", phase="x"))
        # Params the client's own model would refuse, sent as they are: the server's validation answers.
        invalid = TailRequest.model_construct(
            params=TailParams.model_construct(limit=0), method="nexo/audit/tail"
        )
        errors_on_lane = [
            await outcome(audit.request(missing, GoalUpdateResult, timeout=10)),
            await outcome(audit.request(invalid, TailResult, timeout=10)),
        ]
        errors_on_sdk = [
            await outcome(on_sdk(audit, missing, GoalUpdateResult)),
            await outcome(on_sdk(audit, invalid, TailResult)),
        ]
    assert [entry.seq for entry in appended.entries] == [1, 2, 3]
    # The SDK stamps its serverInfo in a 2026-07-28 answer's _meta; the rest is the same.
    assert lane_tail.model_dump(exclude={"meta"}) == sdk_tail.model_dump(exclude={"meta"})
    assert [number(entry) for entry in lane_tail.entries] == [0, 1, 2]
    assert (created.goal.id, created.goal.status) == ("g-lane", "running")
    assert errors_on_lane == errors_on_sdk
    assert errors_on_lane[0] is not None
    assert errors_on_lane[0][0] == GOAL_NOT_FOUND
    assert errors_on_lane[1] == (types.INVALID_PARAMS, "Invalid request parameters")


async def test_lane_requests_and_tool_calls_at_once_each_get_their_own_answer(tmp_path: Path) -> None:
    async with forked(tmp_path, "servers.audit", "servers.time") as mesh:
        audit = mesh["audit"]
        seqs: dict[int, int] = {}
        tool_texts: list[str] = []

        async def append(i: int) -> None:
            result = await audit.request(
                AppendRequest(params=AppendParams(entries=[draft(i)])), AppendResult, timeout=20
            )
            seqs[i] = result.entries[0].seq

        async def search() -> None:
            result = await audit.call_tool("audit_search", {"query": "turn"}, timeout=20)
            assert not result.is_error, result
            tool_texts.append(str(result.content))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(60):
                    tg.start_soon(append, i)
                    if i % 6 == 0:
                        tg.start_soon(search)
        stored = await audit.request(
            TailRequest(params=TailParams(goal_id="g-lane", limit=100)), TailResult, timeout=10
        )
    assert sorted(seqs.values()) == list(range(1, 61))
    assert len(tool_texts) == 10
    assert {number(entry): entry.seq for entry in stored.entries} == seqs


async def test_a_server_killed_under_a_lane_request_is_unavailable_and_the_next_one_reaches_its_successor(
    tmp_path: Path,
) -> None:
    async with forked(tmp_path, "servers.cron", "servers.time") as mesh:
        cron = mesh["cron"]
        assert cron.on_lane
        [pid] = child_pids(os.getpid(), "servers.cron")
        pull = PullRequest(params=PullParams(wait_ms=30_000))
        failures: list[BaseException] = []

        async def waiting_pull() -> None:
            try:
                await cron.request(pull, PullResult, timeout=60)
            except ServerUnavailable as exc:
                failures.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting_pull)
                await anyio.wait_all_tasks_blocked()  # the pull is written and waits for its answer
                os.kill(pid, signal.SIGKILL)
            await cron.wait_ready(30)
            # A pull given up by its caller is cancelled at the server, and the lane goes on.
            with anyio.move_on_after(0.3):
                await cron.request(pull, PullResult, timeout=60)
            quick = await cron.request(PullRequest(params=PullParams(wait_ms=0)), PullResult, timeout=10)
            on_lane_again = cron.on_lane
    assert len(failures) == 1
    assert "went away" in str(failures[0])
    assert quick.events == []
    assert on_lane_again


async def test_a_channels_outbound_tool_answers_on_the_lane_as_on_its_sdk_session(tmp_path: Path) -> None:
    async with forked(tmp_path, "channel_servers.console", "servers.time") as mesh:
        console = mesh["console"]
        client = console.client
        assert client is not None
        reply = {"text": "hello", "chat_id": "operator", "idempotency_key": "reply-1"}
        on_lane = await console.call_tool("send_message", reply)
        on_sdk = await client.call_tool("send_message", reply)
        again_on_lane = await console.call_tool("send_message", reply)
        refused_on_lane = await console.call_tool("send_message", {"chat_id": "operator"})
        refused_on_sdk = await client.call_tool("send_message", {"chat_id": "operator"})
        other_tool = await mesh["time"].call_tool("now", {"timezone_name": "UTC"})
        lane_tools = console.lane_tools
    # Nobody is at the terminal: queued, then the same key is a duplicate whichever way it comes.
    assert on_lane.structured_content == {"status": "queued", "message_id": "1"}
    assert (
        on_sdk.structured_content
        == again_on_lane.structured_content
        == {"status": "duplicate", "message_id": "1"}
    )
    assert (refused_on_lane.is_error, refused_on_sdk.is_error) == (True, True)
    assert refused_on_lane.content == refused_on_sdk.content
    assert lane_tools == frozenset({"send_message"})
    assert not other_tool.is_error
