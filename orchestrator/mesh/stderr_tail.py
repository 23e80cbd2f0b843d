"""The last line a stdio server wrote on stderr, kept while everything it writes still reaches ours.

A server that cannot start (a rejected token, a bad setting) says why in one line on stderr and
exits before the MCP handshake; the client only sees the pipe close. The doctors keep that line so
their report names the cause instead of "not connected".
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

import anyio

MAX_LINE = 500
READ_SIZE = 65536


class StderrTail:
    def __init__(self) -> None:
        self.last_line: str | None = None
        self._partial = b""

    def forget(self) -> None:
        """A new attempt starts: what an earlier child said is not its reason."""
        self.last_line, self._partial = None, b""

    def feed(self, data: bytes) -> None:
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            self._keep(raw)

    def finish(self) -> None:
        """The child is gone: an unterminated last line counts too."""
        self._keep(self._partial)
        self._partial = b""

    def _keep(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").strip()
        if line:
            self.last_line = line[:MAX_LINE]


def _forward(data: bytes) -> None:
    with contextlib.suppress(OSError):  # our own stderr closed: the tail is still kept
        view = memoryview(data)
        while view:
            view = view[os.write(sys.stderr.fileno(), view) :]


def _drain(fd: int, tail: StderrTail) -> bool:
    """Read what is waiting; False at end of file."""
    while True:
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return True
        if not data:
            return False
        _forward(data)
        tail.feed(data)


@asynccontextmanager
async def teed_stderr(tail: StderrTail) -> AsyncIterator[TextIO]:
    """A writable file to hand a child as its stderr; what it writes goes on to ours and into ``tail``."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    errlog = os.fdopen(write_fd, "w")

    async def relay() -> None:
        while True:
            await anyio.wait_readable(read_fd)
            if not _drain(read_fd, tail):
                return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            try:
                yield errlog
            finally:
                tg.cancel_scope.cancel()
    finally:
        # The child has exited by now (the transport waits for it): its last words are in the pipe.
        errlog.close()
        _drain(read_fd, tail)
        tail.finish()
        os.close(read_fd)
