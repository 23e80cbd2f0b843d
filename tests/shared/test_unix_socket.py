"""shared.unix_socket: Unix stream sockets that a cancellation can interrupt at any moment.

The first test is the case the module exists for: a read cancelled in the same turn of the event
loop in which the peer's bytes arrive. anyio's own Unix streams (``anyio.connect_unix``) raise
``InvalidStateError`` from a loop callback there (``Future.set_result`` on the cancelled future),
which failed a browser test of the dashboard once in six CI runs.
"""

from __future__ import annotations

import asyncio
import socket
import stat
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from shared import unix_socket
from shared.unix_socket import UnixStream

pytestmark = pytest.mark.anyio
WAIT_S = 10.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the race is asyncio's event loop's


async def _pair(path: Path) -> tuple[unix_socket.UnixListener, UnixStream, UnixStream]:
    listener = await unix_socket.listen(path, mode=0o600)
    client = await unix_socket.connect(path)
    return listener, client, await listener.accept()


async def test_a_read_cancelled_as_the_bytes_arrive_raises_nothing_and_loses_nothing(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        listener, client, server = await _pair(tmp_path / "s.sock")
        async with listener, client, server, anyio.create_task_group() as tg:
            reading = anyio.CancelScope()
            started, ended = anyio.Event(), anyio.Event()

            async def read() -> None:
                with reading:
                    started.set()
                    await client.receive()
                ended.set()

            tg.start_soon(read)
            await started.wait()
            await anyio.lowlevel.checkpoint()  # the read now waits for the socket
            await server.send(b"hello")
            # Queued before the loop next polls the socket: the cancellation runs first in the
            # turn in which the socket is reported readable.
            loop.call_soon(reading.cancel)
            with anyio.fail_after(WAIT_S):
                await ended.wait()
                received = await client.receive()
        assert reading.cancelled_caught
        assert received == b"hello"
        assert reported == []
    finally:
        loop.set_exception_handler(previous)


async def test_bytes_go_both_ways_and_the_end_of_either_side_is_seen(tmp_path: Path) -> None:
    listener, client, server = await _pair(tmp_path / "s.sock")
    async with listener, client, server:
        await client.send(b"ping\n")
        assert await server.receive() == b"ping\n"
        await server.send(b"pong\n")
        assert await client.receive() == b"pong\n"
        await client.send_eof()
        with pytest.raises(anyio.EndOfStream):
            await server.receive()
        await server.send(b"still open the other way")
        assert await client.receive() == b"still open the other way"


async def test_a_send_larger_than_the_socket_buffer_waits_for_the_reader(tmp_path: Path) -> None:
    listener, client, server = await _pair(tmp_path / "s.sock")
    payload = bytes(range(256)) * 16_384  # 4 MiB: many times a socket buffer
    received = bytearray()
    async with listener, client, server, anyio.create_task_group() as tg:

        async def read() -> None:
            while len(received) < len(payload):
                received.extend(await server.receive())

        tg.start_soon(read)
        with anyio.fail_after(WAIT_S):
            await client.send(payload)
    assert bytes(received) == payload


async def test_closing_wakes_a_waiting_reader_and_refuses_later_calls(tmp_path: Path) -> None:
    listener, client, server = await _pair(tmp_path / "s.sock")
    async with listener, server, anyio.create_task_group() as tg:
        failed: list[BaseException] = []
        started = anyio.Event()

        async def read() -> None:
            started.set()
            try:
                await client.receive()
            except anyio.ClosedResourceError as exc:
                failed.append(exc)

        tg.start_soon(read)
        await started.wait()
        await anyio.lowlevel.checkpoint()
        with anyio.fail_after(WAIT_S):
            await client.aclose()
    assert len(failed) == 1
    with pytest.raises(anyio.ClosedResourceError):
        await client.send(b"x")
    with pytest.raises(anyio.ClosedResourceError):
        await client.receive()
    await client.aclose()  # twice is harmless


async def test_writing_to_a_peer_that_hung_up_is_a_broken_stream(tmp_path: Path) -> None:
    listener, client, server = await _pair(tmp_path / "s.sock")
    async with listener, client:
        await server.aclose()
        with pytest.raises(anyio.BrokenResourceError):
            await _write_until_refused(client)


async def _write_until_refused(stream: UnixStream) -> None:
    with anyio.fail_after(WAIT_S):
        for _ in range(1_000):  # the first writes may still be buffered
            await stream.send(b"x" * 65_536)


async def test_the_listener_is_private_and_serves_each_connection_in_its_own_task(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    listener = await unix_socket.listen(path, mode=0o600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(path.stat().st_mode)
    answered: list[bytes] = []

    async def echo(stream: UnixStream) -> None:
        async with stream:
            await stream.send(b"re: " + await stream.receive())

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, echo)
        with anyio.fail_after(WAIT_S):
            clients = [await unix_socket.connect(path) for _ in range(3)]
            for number, stream in enumerate(clients):
                await stream.send(b"%d" % number)
            for stream in clients:
                async with stream:
                    answered.append(await stream.receive())
        tg.cancel_scope.cancel()
    assert answered == [b"re: 0", b"re: 1", b"re: 2"]


async def test_an_accept_waiting_when_the_listener_closes_is_told_so(tmp_path: Path) -> None:
    listener = await unix_socket.listen(tmp_path / "s.sock")
    outcome: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def accept() -> None:
            try:
                await listener.accept()
            except anyio.ClosedResourceError as exc:
                outcome.append(exc)

        tg.start_soon(accept)
        await anyio.lowlevel.checkpoint()
        with anyio.fail_after(WAIT_S):
            await listener.aclose()
    assert len(outcome) == 1


async def test_connecting_reports_a_missing_or_dead_socket_as_the_system_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await unix_socket.connect(tmp_path / "missing.sock")
    stale = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(stale))
    dead.close()  # bound, never listening: what a crashed process leaves
    with pytest.raises(ConnectionRefusedError):
        await unix_socket.connect(stale)
    with pytest.raises(OSError, match="in use"):
        await unix_socket.listen(stale)
