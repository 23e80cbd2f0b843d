"""Unix stream sockets as anyio byte streams that a cancellation can interrupt at any moment.

The daemon's control socket, the console's socket and the chat client use these instead of
``anyio.connect_unix`` and ``anyio.create_unix_listener``. On asyncio, anyio's own Unix streams wait
for their socket by registering a future's ``set_result`` as the event loop's reader. When the
waiting task is cancelled in the same turn of the loop in which the socket becomes readable (a
timeout, or a shutdown, meeting the peer's data or its hang-up), the loop then calls ``set_result``
on the cancelled future: ``InvalidStateError`` is raised in a loop callback, logged as an error by a
running daemon and failing any test in which it happens. These streams wait with
``anyio.wait_readable`` and ``anyio.wait_writable``, which settle their wait only while it is
pending: a cancelled read returns nothing and loses nothing, and the next read gets the bytes.

The rest is anyio's behaviour: each call is a checkpoint; the end of the peer's data raises
``EndOfStream``; a socket error raises ``BrokenResourceError`` (``ClosedResourceError`` once closed
here, and in a task still waiting on it when another closes it).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel

T = TypeVar("T")
RECEIVE_BYTES = 65_536
"""What ``receive()`` reads at most by default, as anyio's socket streams do."""


class _Owned:
    """A non-blocking socket this object owns and closes."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._socket = sock
        self._closed = False

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._socket)  # a task waiting on it gets ClosedResourceError
            self._socket.close()
        await anyio.lowlevel.checkpoint()

    def _check_open(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError

    async def _when_ready(
        self, attempt: Callable[[], T], wait: Callable[[socket.socket], Awaitable[None]]
    ) -> T:
        """``attempt()`` once the socket is ready for it (``wait``), as often as it would block."""
        while True:
            self._check_open()
            try:
                try:
                    return attempt()
                except BlockingIOError:
                    await wait(self._socket)
            except OSError as exc:  # the attempt failed, or the descriptor went bad under the wait
                raise _failed(exc, closed=self._closed) from exc


class UnixStream(_Owned, anyio.abc.ByteStream):
    """One connected Unix stream socket."""

    async def receive(self, max_bytes: int = RECEIVE_BYTES) -> bytes:
        await anyio.lowlevel.checkpoint()
        data = await self._when_ready(partial(self._socket.recv, max_bytes), anyio.wait_readable)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        view = memoryview(item)
        while view:
            sent = await self._when_ready(partial(self._socket.send, view), anyio.wait_writable)
            view = view[sent:]

    async def send_eof(self) -> None:
        self._check_open()
        try:
            self._socket.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise _failed(exc, closed=self._closed) from exc


class UnixListener(_Owned, anyio.abc.Listener[UnixStream]):
    """A listening Unix stream socket; ``serve()`` hands each connection to its own task."""

    async def accept(self) -> UnixStream:
        await anyio.lowlevel.checkpoint()
        connection, _ = await self._when_ready(self._socket.accept, anyio.wait_readable)
        return UnixStream(connection)

    async def serve(
        self,
        handler: Callable[[UnixStream], Any],
        task_group: anyio.abc.TaskGroup | None = None,
    ) -> None:
        async with contextlib.AsyncExitStack() as stack:
            if task_group is None:
                task_group = await stack.enter_async_context(anyio.create_task_group())
            while True:
                task_group.start_soon(handler, await self.accept())


def _failed(exc: OSError, *, closed: bool) -> Exception:
    return anyio.ClosedResourceError() if closed else anyio.BrokenResourceError(str(exc))


async def connect(path: Path | str) -> UnixStream:
    """A stream connected to the socket at ``path``; ``FileNotFoundError``, ``ConnectionRefusedError``
    and ``PermissionError`` as ``socket.connect`` raises them."""
    await anyio.lowlevel.checkpoint()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        while True:
            try:
                sock.connect(os.fspath(path))
            except BlockingIOError:  # the listener's backlog is full: try again once there is room
                await anyio.wait_writable(sock)
            else:
                return UnixStream(sock)
    except BaseException:
        sock.close()
        raise


async def listen(path: Path | str, *, mode: int | None = None) -> UnixListener:
    """A listener bound to ``path`` (which must not exist), its mode set to ``mode`` when given."""
    await anyio.lowlevel.checkpoint()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fspath(path))
        if mode is not None:
            Path(path).chmod(mode)  # noqa: ASYNC240 -- once, as the socket is created
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return UnixListener(sock)
