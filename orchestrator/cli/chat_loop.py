"""The chat of ``nexo run --chat``: the same conversation as ``nexo chat`` (``chat_view.py``), run
inside the daemon's event loop so that leaving it stops the orchestrator."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import anyio

from orchestrator.cli.chat_view import (
    ANSWERED,
    CONNECT_WAIT_S,
    FAILED,
    READ_CHUNK_BYTES,
    ConsoleClosed,
    InteractiveChat,
    PipedChat,
    connect_retry_delay,
    frames_in,
    new_message_id,
    no_console,
    not_permitted,
)
from orchestrator.cli.common import EXIT_FAIL, EXIT_OK
from shared import unix_socket
from shared.protocol.console_wire import Hello, LineSplitter, Say, ServerFrame, encode
from shared.unix_socket import UnixStream

_STREAM_ENDED = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


async def connect(path: Path, wait_s: float) -> UnixStream:
    """Connect, waiting briefly for a console that is still starting."""
    start = anyio.current_time()
    with anyio.move_on_after(wait_s):
        while True:
            try:
                return await unix_socket.connect(path)
            except (FileNotFoundError, ConnectionRefusedError):
                await anyio.sleep(connect_retry_delay(anyio.current_time() - start))
            except PermissionError:
                raise not_permitted(path) from None
    raise no_console(path)


class ChatSession:
    """The console's socket as an anyio stream; frames received ahead of their turn wait in ``ready``."""

    def __init__(self, stream: UnixStream) -> None:
        self.stream = stream
        self.splitter = LineSplitter()
        self.ready: list[ServerFrame] = []

    async def send(self, frame: Say | Hello) -> None:
        try:
            await self.stream.send(encode(frame))
        except (*_STREAM_ENDED, OSError) as exc:
            raise ConsoleClosed from exc

    async def receive(self) -> ServerFrame:
        while not self.ready:
            try:
                chunk = await self.stream.receive(READ_CHUNK_BYTES)
            except (*_STREAM_ENDED, OSError):
                chunk = b""
            self.ready.extend(frames_in(self.splitter, chunk))
        return self.ready.pop(0)


async def run_piped(session: ChatSession, view: PipedChat, lines: list[str], timeout_s: float) -> int:
    for text in lines:
        message_id = new_message_id()
        await session.send(Say(id=message_id, text=text))
        with anyio.move_on_after(timeout_s):
            while True:
                outcome = view.on_frame(await session.receive(), message_id)
                if outcome == FAILED:
                    return EXIT_FAIL
                if outcome == ANSWERED:
                    break
            continue
        return view.timed_out(timeout_s)
    return EXIT_OK


async def run_interactive(session: ChatSession, view: InteractiveChat, stdin: TextIO) -> int:
    async with anyio.create_task_group() as tg:

        async def show() -> None:
            while True:
                try:
                    frame = await session.receive()
                except ConnectionError as exc:
                    view.closed(exc)
                    tg.cancel_scope.cancel()
                    return
                view.show(frame)

        tg.start_soon(show)
        terminal = TerminalLines(stdin.fileno())
        while (line := await terminal.next_line()) is not None:
            say = view.say(line)
            if say is None:
                continue
            try:
                await session.send(say)
            except ConsoleClosed as exc:
                view.closed(exc, while_sending=True)
                break
        tg.cancel_scope.cancel()
    return EXIT_OK


class TerminalLines:
    """Lines typed at the terminal, read when the event loop says the terminal is readable.

    No worker thread: a thread blocked in ``readline`` outlives a cancelled chat, and the
    interpreter waits for it at exit, so one Ctrl-C in ``nexo run --chat`` would hang.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.splitter = LineSplitter(limit=None)
        self.lines: list[bytes] = []
        self.ended = False

    async def next_line(self) -> bytes | None:
        """The next line without its newline; None after end of input (Ctrl-D)."""
        while not self.lines:
            if self.ended:
                return None
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, READ_CHUNK_BYTES)
            except OSError:  # EIO: the terminal was closed (hung up); nothing more can be typed
                chunk = b""
            if chunk:
                self.lines.extend(self.splitter.feed(chunk))
            else:
                self.ended = True
                if rest := self.splitter.rest():
                    self.lines.append(rest)
        return self.lines.pop(0)


async def chat(path: Path, *, chat_id: str, timeout_s: float, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    interactive = stdin.isatty()
    lines = [] if interactive else [line.rstrip("\n") for line in stdin if line.strip()]
    stream = await connect(path, CONNECT_WAIT_S)
    async with stream:
        session = ChatSession(stream)
        await session.send(Hello(chat_id=chat_id))
        if interactive:
            view = InteractiveChat(out, err)
            view.greet(path)
            return await run_interactive(session, view, stdin)
        return await run_piped(session, PipedChat(out, err), lines, timeout_s)
