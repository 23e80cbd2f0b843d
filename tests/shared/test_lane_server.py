"""The server's end of the control lane: which lines it takes from the SDK, how it answers them, and
how a cancelled lane request ends, with the lane's real classes over in-memory lines."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError

from shared.hosting.lane import LaneLines, LaneMethods, ServerLane, WholeLines
from shared.protocol.deferred import WireParams, WireResult
from shared.protocol.lane import cancel_line, request_line

pytestmark = pytest.mark.anyio


class EchoParams(WireParams):
    text: str
    times: int = 1


class EchoResult(WireResult):
    text: str
    state: str
    note: str | None = None


class Probe(Extension):
    """Methods that answer, refuse, crash and wait, recording what their handlers saw."""

    identifier = "nexo/probe"

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, Any]] = []
        self.waiting = anyio.Event()
        self.cancelled = anyio.Event()

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("nexo/probe/echo", EchoParams, self._echo),
            MethodBinding("nexo/probe/refuse", EchoParams, self._refuse),
            MethodBinding("nexo/probe/crash", EchoParams, self._crash),
            MethodBinding("nexo/probe/wait", EchoParams, self._wait),
        )

    async def _echo(self, ctx: Any, params: EchoParams) -> EchoResult:
        self.seen.append((ctx.lifespan_context, ctx.method, ctx.request_id))
        await ctx.session.report_progress(0.5)  # no token: goes nowhere, as on the SDK's path
        return EchoResult(text=params.text * params.times, state=ctx.lifespan_context["name"])

    async def _refuse(self, ctx: Any, params: EchoParams) -> EchoResult:
        raise MCPError(-32010, f"no room for {params.text}", {"free": 0})

    async def _crash(self, ctx: Any, params: EchoParams) -> EchoResult:
        raise RuntimeError("a secret the wire must not carry")

    async def _wait(self, ctx: Any, params: EchoParams) -> EchoResult:
        self.waiting.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")


class Written:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.grew = anyio.Event()

    async def __call__(self, text: str) -> None:
        self.lines.append(text)
        self.grew.set()
        self.grew = anyio.Event()

    def answers(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


async def _lines(items: list[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


@asynccontextmanager
async def serving(probe: Probe) -> AsyncIterator[tuple[LaneMethods, Written, ServerLane]]:
    methods = LaneMethods([probe])

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[dict[str, str]]:
        yield {"name": "probe state"}

    written = Written()
    async with methods.keeping(lifespan)(None), anyio.create_task_group() as tg:
        yield methods, written, ServerLane(methods, WholeLines(written), tg)
        tg.cancel_scope.cancel()


def lane(request_id: str, method: str, params: dict[str, Any]) -> str:
    return request_line(request_id, method, json.dumps(params)).decode()


async def _passed(lane_: ServerLane, items: list[str]) -> list[str]:
    return [line async for line in LaneLines(_lines(items).__aiter__(), lane_)]


async def _settled(written: Written, count: int) -> None:
    with anyio.fail_after(5):
        while len(written.lines) < count:
            await written.grew.wait()


async def test_a_lane_request_is_answered_by_its_method_as_the_sdk_would_dump_its_result() -> None:
    probe = Probe()
    async with serving(probe) as (_, written, server_lane):
        passed = await _passed(server_lane, [lane("nexo:7", "nexo/probe/echo", {"text": "ab", "times": 2})])
        await _settled(written, 1)
    assert passed == []
    assert written.answers() == [
        {"jsonrpc": "2.0", "id": "nexo:7", "result": {"text": "abab", "state": "probe state"}}
    ]
    assert probe.seen == [({"name": "probe state"}, "nexo/probe/echo", "nexo:7")]
    assert written.lines[0].endswith("}\n")
    assert written.lines[0].count("\n") == 1


async def test_every_line_that_is_not_a_lane_request_for_one_of_its_methods_goes_to_the_sdk_unchanged() -> (
    None
):
    sdk_lines = [
        # The SDK's own ids are integers, even for a control method.
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "nexo/probe/echo", "params": {"text": "x"}}) + "\n",
        lane("nexo:1", "tools/call", {"name": "echo"}),  # not a control method of this server
        lane("nexo:2", "nexo/probe/echo", {"text": "x", "_meta": {"progressToken": 5}}),  # progress: SDK
        '{"jsonrpc":"2.0","id":"nexo:3","method":"nexo/probe/echo","params":[1]}\n',  # params not an object
        '{"jsonrpc":"2.0","id":"nexo:4", not json\n',
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
        + "\n",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "nexo:5"}})
        + "\n",
    ]
    async with serving(Probe()) as (_, written, server_lane):
        passed = await _passed(server_lane, sdk_lines)
        await anyio.lowlevel.checkpoint()
    assert passed == sdk_lines
    assert written.lines == []


async def test_before_the_servers_state_exists_every_line_is_the_sdks() -> None:
    methods = LaneMethods([Probe()])
    written = Written()
    line = lane("nexo:1", "nexo/probe/echo", {"text": "x"})
    async with anyio.create_task_group() as tg:
        passed = await _passed(ServerLane(methods, WholeLines(written), tg), [line])
    assert passed == [line]
    assert methods.settings() == {
        "methods": ["nexo/probe/crash", "nexo/probe/echo", "nexo/probe/refuse", "nexo/probe/wait"],
        "tools": [],
        "transport": "stdio",
    }


async def test_a_refusal_invalid_params_and_a_crash_answer_with_the_sdks_codes_and_nothing_internal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="nexo.lane")
    async with serving(Probe()) as (_, written, server_lane):
        await _passed(
            server_lane,
            [
                lane("nexo:1", "nexo/probe/refuse", {"text": "it"}),
                lane("nexo:2", "nexo/probe/echo", {"text": 5}),
                lane("nexo:3", "nexo/probe/crash", {"text": "x"}),
            ],
        )
        await _settled(written, 3)
    answers = {answer["id"]: answer["error"] for answer in written.answers()}
    assert answers == {
        "nexo:1": {"code": -32010, "message": "no room for it", "data": {"free": 0}},
        "nexo:2": {"code": -32602, "message": "Invalid request parameters", "data": ""},
        "nexo:3": {"code": -32603, "message": "Internal server error"},
    }
    assert "a secret" not in "".join(written.lines)
    assert [record.getMessage() for record in caplog.records] == ["control method nexo/probe/crash failed"]


async def test_a_cancelled_lane_request_stops_its_handler_and_is_never_answered() -> None:
    probe = Probe()
    async with serving(probe) as (_, written, server_lane):
        await _passed(server_lane, [lane("nexo:9", "nexo/probe/wait", {"text": "x"})])
        with anyio.fail_after(5):
            await probe.waiting.wait()
        await _passed(server_lane, [cancel_line("nexo:9", "gave up").decode()])
        with anyio.fail_after(5):
            await probe.cancelled.wait()
        # The lane goes on answering after it.
        await _passed(server_lane, [lane("nexo:10", "nexo/probe/echo", {"text": "on"})])
        await _settled(written, 1)
        # A cancel for a request that already ended is taken and changes nothing.
        assert await _passed(server_lane, [cancel_line("nexo:10", "late").decode()]) == []
    assert [answer["id"] for answer in written.answers()] == ["nexo:10"]


async def test_answers_written_at_once_never_land_inside_one_another() -> None:
    pieces: list[str] = []

    async def slow_write(text: str) -> None:
        half = len(text) // 2
        pieces.append(text[:half])
        await anyio.lowlevel.checkpoint()  # a full pipe: the rest waits for room
        pieces.append(text[half:])

    out = WholeLines(slow_write)
    lines = [f'{{"n":{i},"pad":"{"x" * i}"}}\n' for i in range(40)]
    async with anyio.create_task_group() as tg:
        for line in lines:
            tg.start_soon(out.write, line)
    assert sorted("".join(pieces).splitlines(keepends=True)) == sorted(lines)


async def test_only_the_tools_the_server_lists_are_called_on_the_lane() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        calls.append((params.name, dict(params.arguments or {})))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=ctx.lifespan_context["name"])],
            structured_content={"status": "sent"},
        )

    methods = LaneMethods([], tools=["send_message"], call_tool=call_tool)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[dict[str, str]]:
        yield {"name": "channel state"}

    written = Written()
    other = lane("nexo:2", "tools/call", {"name": "delete_everything", "arguments": {}})
    async with methods.keeping(lifespan)(None), anyio.create_task_group() as tg:
        server_lane = ServerLane(methods, WholeLines(written), tg)
        passed = await _passed(
            server_lane,
            [lane("nexo:1", "tools/call", {"name": "send_message", "arguments": {"text": "hi"}}), other],
        )
        await _settled(written, 1)
    assert passed == [other]
    assert calls == [("send_message", {"text": "hi"})]
    assert written.answers() == [
        {
            "jsonrpc": "2.0",
            "id": "nexo:1",
            "result": {
                "content": [{"type": "text", "text": "channel state"}],
                "structuredContent": {"status": "sent"},
                "isError": False,
                "resultType": "complete",
            },
        }
    ]
    assert methods.settings()["tools"] == ["send_message"]
