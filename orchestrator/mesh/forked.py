"""The stdio transport to a forked built-in server: the SDK's stdio client, minus the spawn.

Framing and shutdown follow ``mcp.client.stdio`` exactly (newline-delimited JSON-RPC; close
stdin, wait, SIGTERM the process group, wait, SIGKILL), so a forked server is indistinguishable
from a spawned one to the session above and to the supervision around it.
"""

from __future__ import annotations

import codecs
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from orchestrator.mesh.forked_process import ForkedProcess
from orchestrator.mesh.lane import ClientLane

logger = logging.getLogger("nexo.mesh")

EXIT_GRACE_S = 2.0
"""After stdin closes, as the SDK's ``PROCESS_TERMINATION_TIMEOUT``."""
TERM_GRACE_S = 2.0
"""After SIGTERM, as the SDK's ``FORCE_KILL_TIMEOUT``."""
FLUSH_S = 0.5
CHUNK = 1 << 16


def _parse_line(line: str) -> SessionMessage | Exception:
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        logger.exception("Failed to parse JSONRPC message from server")
        return exc
    return SessionMessage(message)


async def _read_chunk(fd: int) -> bytes:
    while True:
        await anyio.wait_readable(fd)
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:
            continue


async def _read_chunk_or_end(fd: int) -> bytes:
    try:
        return await _read_chunk(fd)
    except OSError:
        return b""


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        await anyio.wait_writable(fd)
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[written:]


async def _stop(process: ForkedProcess) -> None:
    if await process.wait(EXIT_GRACE_S):
        return
    process.kill_group(signal.SIGTERM)
    if await process.wait(TERM_GRACE_S):
        return
    process.kill_group(signal.SIGKILL)
    if not await process.wait(TERM_GRACE_S):
        logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)


@asynccontextmanager
async def forked_stdio(
    process: ForkedProcess, stdin: int, stdout: int, lane: ClientLane | None = None
) -> AsyncIterator[tuple[object, object]]:
    """Streams over ``stdin``/``stdout`` (our ends of the child's pipes), which this then owns;
    ``lane`` gets its own way onto stdin and its answers off stdout (``orchestrator.mesh.lane``)."""
    for fd in (stdin, stdout):
        os.set_blocking(fd, False)
    turns = anyio.Lock()

    async def write(data: bytes) -> None:
        async with turns:
            await _write_all(stdin, data)

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stdin_open = True

    async def reader() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")()
        buffer = ""
        deliver = True
        async with read_writer:
            try:
                while chunk := await _read_chunk_or_end(stdout):
                    lines = (buffer + decoder.decode(chunk)).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not deliver:
                            continue  # drained so a server flushing its output can still exit
                        if lane is not None and lane.deliver(line):
                            continue
                        try:
                            await read_writer.send(_parse_line(line))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            deliver = False
            finally:
                if lane is not None:
                    lane.close()

    async def writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await write((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()
        finally:
            writer_done.set()

    def close_stdin() -> None:
        nonlocal stdin_open
        if stdin_open:
            stdin_open = False
            anyio.notify_closing(stdin)
            os.close(stdin)

    if lane is not None:
        lane.attach(write)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    read_stream.close()
                    write_stream.close()
                    with anyio.move_on_after(FLUSH_S):
                        await writer_done.wait()
                    if lane is not None:
                        lane.close()
                    close_stdin()
                    await _stop(process)
                tg.cancel_scope.cancel()
    finally:
        close_stdin()
        with suppress(OSError):
            os.close(stdout)
        process.close()
