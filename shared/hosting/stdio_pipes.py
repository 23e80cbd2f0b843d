"""Stdio served from the event loop when stdin and stdout are pipes: no thread per line.

The SDK's ``stdio_server()`` wraps stdin and stdout in anyio's thread-backed files: each line read
and each answer written (a write, then a flush) is a hand-over to a worker thread and back, three
per request. On a server's hot path (the audit server takes several requests per turn) that was
about a tenth of its CPU. When both ends are pipes or sockets (as every MCP client starts a stdio
server, and as the orchestrator forks its built-in servers), this module reads and writes them
non-blocking from the event loop instead, and hands the SDK's ``stdio_server`` the two streams.

It keeps what the SDK's own claim of the descriptors does: while serving, descriptor 0 reads the
null device and descriptor 1 writes to stderr, so a handler or a child process that prints cannot
corrupt the protocol; both are put back on exit. Anything else on stdin or stdout (a terminal, a
file) is served by the SDK's default, unchanged.
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import anyio

READ_CHUNK = 65_536


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class PipeLines:
    """The lines of a non-blocking descriptor, read as the event loop says it is readable; decoded
    as UTF-8 with replacement, as the SDK decodes stdin (a bad byte is one bad message, not the end)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._start = 0
        self._ended = False

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n", self._start)
            if end >= 0:
                line = self._buffer[self._start : end + 1]
                self._start = end + 1
                return line.decode("utf-8", errors="replace")
            if self._ended:
                rest = self._buffer[self._start :]
                self._buffer.clear()
                self._start = 0
                if rest:
                    return rest.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            del self._buffer[: self._start]
            self._start = 0
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._ended = True


class PipeWriter:
    """Writes whole messages to a non-blocking descriptor, waiting in the event loop while the pipe
    is full. A reader that is gone raises BrokenPipeError, as a blocking write would."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered here: each write is on the pipe when it returns."""


@contextmanager
def claimed_pipes() -> Iterator[tuple[PipeLines, PipeWriter] | None]:
    """stdin and stdout as event-loop streams for the block, or None when either is not a pipe or a
    socket (the SDK's own stdio then serves them)."""
    if not (_is_pipe_or_socket(0) and _is_pipe_or_socket(1)):
        yield None
        return
    with suppress(ValueError, OSError):
        sys.stdout.flush()  # what is buffered belongs to the wire, before it is moved
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.set_blocking(wire_in, False)
    os.set_blocking(wire_out, False)
    try:
        yield PipeLines(wire_in), PipeWriter(wire_out)
    finally:
        # The descriptions are shared with the descriptors put back: they leave blocking, as given.
        os.set_blocking(wire_in, True)
        os.set_blocking(wire_out, True)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)
