"""The orchestrator's end of the control lane: what it writes, which lines it takes off the server's
stdout, and what its caller gets for an answer, an error, a closed connection and a wait given up."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from orchestrator.mesh.lane import ClientLane
from shared.protocol.deferred import WireParams, WireRequest, WireResult
from shared.protocol.lane import error_line, result_line

pytestmark = pytest.mark.anyio


class EchoParams(WireParams):
    text: str
    note: str | None = None


class EchoRequest(WireRequest[EchoParams, Literal["nexo/probe/echo"]]):
    method: Literal["nexo/probe/echo"] = "nexo/probe/echo"


class EchoResult(WireResult):
    text: str


class Pipe:
    """The server's stdin as the lane writes it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.arrived = anyio.Event()

    async def write(self, data: bytes) -> None:
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1
        self.sent.append(json.loads(data))
        self.arrived.set()
        self.arrived = anyio.Event()

    async def next(self, count: int) -> dict[str, Any]:
        with anyio.fail_after(5):
            while len(self.sent) < count:
                await self.arrived.wait()
        return self.sent[count - 1]


def attached() -> tuple[ClientLane, Pipe]:
    lane, pipe = ClientLane(), Pipe()
    lane.attach(pipe.write)
    return lane, pipe


async def test_a_request_goes_out_with_a_lane_id_and_its_answer_comes_back_as_the_result_model() -> None:
    lane, pipe = attached()
    got: list[EchoResult] = []

    async def call() -> None:
        got.append(await lane.request(EchoRequest(params=EchoParams(text="hi")), EchoResult))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        sent = await pipe.next(1)
        answer = result_line(sent["id"], '{"text":"hi back","resultType":"complete"}')
        assert lane.deliver(answer)
    # By alias, without None: as the SDK's session dumps a request.
    assert sent == {"jsonrpc": "2.0", "id": "nexo:1", "method": "nexo/probe/echo", "params": {"text": "hi"}}
    assert got == [EchoResult(text="hi back")]


async def test_an_error_answer_is_the_mcp_error_the_sdk_would_raise() -> None:
    lane, pipe = attached()

    async def answer() -> None:
        sent = await pipe.next(1)
        lane.deliver(error_line(sent["id"], -32010, "the disk is full", {"free": 0}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        with pytest.raises(MCPError) as raised:
            await lane.request(EchoRequest(params=EchoParams(text="x")), EchoResult)
    assert (raised.value.error.code, raised.value.error.message, raised.value.error.data) == (
        -32010,
        "the disk is full",
        {"free": 0},
    )


async def test_only_answers_to_lane_ids_are_taken_off_the_servers_stdout() -> None:
    lane, _ = attached()
    sdk_lines = [
        '{"jsonrpc":"2.0","id":4,"result":{"text":"nexo:1"}}',
        '{"jsonrpc":"2.0","id":"nexo:1","method":"sampling/createMessage","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"nexo:2"}}',
        '{"jsonrpc":"2.0","id":"nexo:3", broken',
    ]
    assert [lane.deliver(line) for line in sdk_lines] == [False] * 4
    # An answer nobody waits for any more (given up) is taken and dropped.
    assert lane.deliver(result_line("nexo:99", "{}"))


async def test_a_closed_connection_ends_every_wait_with_connection_closed() -> None:
    lane, pipe = attached()
    codes: list[int] = []

    async def call() -> None:
        with pytest.raises(MCPError) as raised:
            await lane.request(EchoRequest(params=EchoParams(text="x")), EchoResult)
        codes.append(raised.value.error.code)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        tg.start_soon(call)
        await pipe.next(2)
        lane.close()
    with pytest.raises(MCPError) as after:
        await lane.request(EchoRequest(params=EchoParams(text="x")), EchoResult)
    assert codes == [types.CONNECTION_CLOSED] * 2
    assert after.value.error.code == types.CONNECTION_CLOSED
    assert not lane.attached


async def test_a_wait_given_up_is_cancelled_at_the_server_and_its_late_answer_dropped() -> None:
    lane, pipe = attached()
    with pytest.raises(TimeoutError), anyio.fail_after(0.2):
        await lane.request(EchoRequest(params=EchoParams(text="slow")), EchoResult)
    request, cancel = pipe.sent
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request["id"], "reason": "the caller stopped waiting"},
    }
    assert lane.deliver(result_line(request["id"], '{"text":"late"}'))

    async def answer() -> None:
        sent = await pipe.next(3)
        lane.deliver(result_line(sent["id"], '{"text":"next"}'))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer)
        assert await lane.request(EchoRequest(params=EchoParams(text="x")), EchoResult) == EchoResult(
            text="next"
        )
