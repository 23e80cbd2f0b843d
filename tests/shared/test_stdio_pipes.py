"""Stdio from the event loop: lines read whole from a non-blocking pipe, answers written whole, the
protocol's descriptors claimed while serving, and a real server spoken to over real pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from shared.hosting.stdio_pipes import READ_CHUNK, PipeLines, PipeWriter
from tests.mesh.test_mcp_server import INITIALIZE

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]


def pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    return read, write


async def test_lines_come_whole_however_the_bytes_arrive_and_the_last_one_without_its_newline() -> None:
    read, write = pipe()
    big = "x" * (READ_CHUNK * 2 + 17)
    pieces = [b'{"a": 1}\n{"b"', b": 2}\n", big.encode() + b"\n", "caf\u00e9 ".encode() + b"\xff\n", b"tail"]
    lines = PipeLines(read)
    got: list[str] = []

    async def feed() -> None:
        for piece in pieces:
            view = memoryview(piece)
            while view:
                try:
                    view = view[os.write(write, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(write)
            await anyio.lowlevel.checkpoint()
        os.close(write)

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        with anyio.fail_after(10):
            got = [line async for line in lines]
    os.close(read)
    # A bad byte is replaced, as the SDK decodes stdin: one bad message, not the end of the stream.
    assert got == ['{"a": 1}\n', '{"b": 2}\n', big + "\n", "caf\u00e9 \ufffd\n", "tail"]


async def test_an_answer_larger_than_the_pipe_is_written_whole_while_the_reader_drains_it() -> None:
    read, write = pipe()
    os.set_blocking(read, True)
    message = json.dumps({"result": "y" * 3_000_000}) + "\n"
    received = bytearray()

    def drain() -> None:
        while chunk := os.read(read, 8192):
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    writer = PipeWriter(write)
    with anyio.fail_after(20):
        await writer.write(message)
        await writer.flush()
    os.close(write)
    reader.join(timeout=20)
    os.close(read)
    assert received.decode() == message


async def test_a_reader_that_is_gone_is_a_broken_pipe() -> None:
    read, write = pipe()
    os.close(read)
    with pytest.raises(BrokenPipeError):
        await PipeWriter(write).write("{}\n")
    os.close(write)


# A server whose tool prints to stdout and starts a child that does: neither may reach the wire.
NOISY_SERVER = r"""
import subprocess, sys
from mcp.server import MCPServer
from shared.hosting.serve import run

server = MCPServer("noisy")

@server.tool()
def shout() -> str:
    print("stray print from a handler")
    subprocess.run([sys.executable, "-c", "print('stray print from a child')"], check=True)
    return "done"

run(server)
"""


def test_a_server_over_pipes_answers_and_what_its_code_prints_goes_to_stderr_not_the_wire() -> None:
    requests = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "shout", "arguments": {}}},
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", NOISY_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    for request in requests:
        process.stdin.write(json.dumps(request) + "\n")
    process.stdin.flush()
    answers = [json.loads(process.stdout.readline()) for _ in range(2)]
    rest, stderr = process.communicate(timeout=30)  # closes stdin: at the end of input the server ends
    assert process.returncode == 0, stderr
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[1]["result"]["content"][0]["text"] == "done"
    assert rest == ""  # nothing but the two answers reached stdout
    assert "stray print from a handler" in stderr
    assert "stray print from a child" in stderr
