"""``nexo chat``: the operator's terminal, connected to the console channel's Unix socket.

Interactive on a terminal; when stdin is piped, each line is sent in turn, each reply printed to
stdout, and the command exits after the reply to the last line.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any, TextIO

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, fail, load_config
from shared.protocol.console_wire import (
    MAX_FRAME_BYTES,
    Approval,
    Error,
    Hello,
    Queued,
    Reply,
    Say,
    Verdict,
    Welcome,
    decode_server,
    encode,
)

CONNECT_WAIT_S = 30.0
READ_CHUNK_BYTES = 4096
_STREAM_ENDED = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)


class ConsoleClosed(ConnectionError):
    """The console channel ended the connection: one sentence for the person, never a traceback."""

    def __init__(self) -> None:
        super().__init__(
            "the console channel closed the connection (its server stopped or is restarting); "
            "run `nexo status` to see why, then `nexo chat` again"
        )


def console_socket(state_dir: Path) -> Path:
    return state_dir / "console" / "console.sock"


async def _connect(path: Path, wait_s: float) -> SocketStream:
    """Connect, waiting briefly for a console that is still starting."""
    with anyio.move_on_after(wait_s):
        while True:
            try:
                return await anyio.connect_unix(path)
            except (FileNotFoundError, ConnectionRefusedError):
                await anyio.sleep(0.1)
            except PermissionError:
                raise ConnectionError(
                    f"this user may not open the console channel's socket {path}: the state directory "
                    "is private to the user that runs `nexo run`. Run `nexo chat` as that user (a "
                    "directory an earlier run left unusable is repaired by the next `nexo run`)"
                ) from None
    raise ConnectionError(f"no console channel is listening on {path}; start the agent with `nexo run`")


class ChatSession:
    def __init__(self, stream: SocketStream, out: TextIO, err: TextIO) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self.out = out
        self.err = err
        self.approvals: list[str] = []

    async def send(self, frame: Say | Hello) -> None:
        try:
            await self.stream.send(encode(frame))
        except (*_STREAM_ENDED, OSError) as exc:
            raise ConsoleClosed from exc

    async def receive(self) -> Welcome | Queued | Reply | Approval | Verdict | Error:
        try:
            line = await self.reader.receive_until(b"\n", MAX_FRAME_BYTES)
        except (*_STREAM_ENDED, OSError) as exc:
            raise ConsoleClosed from exc
        return decode_server(line)

    def show_approval(self, frame: Approval) -> None:
        self.approvals.append(frame.request_id)
        print(
            f"\n[approval {frame.request_id}] {frame.tool_name} {frame.input_preview}\n"
            f"  {frame.description}\n  answer: yes {frame.request_id} | no {frame.request_id}",
            file=self.err,
            flush=True,
        )


async def run_piped(session: ChatSession, lines: list[str], timeout_s: float) -> int:
    for text in lines:
        message_id = uuid.uuid4().hex
        await session.send(Say(id=message_id, text=text))
        with anyio.move_on_after(timeout_s):
            while True:
                frame = await session.receive()
                if isinstance(frame, Reply) and frame.notice:
                    print(frame.text, file=session.err, flush=True)
                elif isinstance(frame, Reply) and frame.reply_to == message_id:
                    print(frame.text, file=session.out, flush=True)
                    break
                elif isinstance(frame, Reply):
                    print(frame.text, file=session.out, flush=True)
                elif isinstance(frame, Approval):
                    session.show_approval(frame)
                elif isinstance(frame, Error):
                    print(f"nexo chat: {frame.message}", file=session.err, flush=True)
                    if frame.message.startswith(("no pending", "bad frame")):
                        continue
                    return EXIT_FAIL
            continue
        print(f"nexo chat: no reply within {timeout_s:g}s; the message stays queued", file=session.err)
        return EXIT_FAIL
    return EXIT_OK


async def run_interactive(session: ChatSession, stdin: TextIO) -> int:
    async with anyio.create_task_group() as tg:

        async def show() -> None:
            while True:
                try:
                    frame = await session.receive()
                except ConsoleClosed as exc:
                    print(f"\n[console closed] {exc}", file=session.err)
                    tg.cancel_scope.cancel()
                    return
                if isinstance(frame, Reply):
                    prefix = "·" if frame.notice else "nexo>"
                    print(f"\n{prefix} {frame.text}\n", file=session.out, flush=True)
                elif isinstance(frame, Approval):
                    session.show_approval(frame)
                elif isinstance(frame, Verdict):
                    print(f"[{frame.behavior} recorded for {frame.request_id}]", file=session.err, flush=True)
                elif isinstance(frame, Error):
                    print(f"[error] {frame.message}", file=session.err, flush=True)

        tg.start_soon(show)
        terminal = TerminalLines(stdin.fileno())
        while (line := await terminal.next_line()) is not None:
            text = line.strip()
            if not text:
                continue
            # A bare y/n answers the only open approval.
            if text.lower() in ("y", "yes", "n", "no") and len(session.approvals) == 1:
                text = f"{text} {session.approvals.pop()}"
            try:
                await session.send(Say(id=uuid.uuid4().hex, text=text))
            except ConsoleClosed as exc:
                print(f"[console closed] {exc}", file=session.err)
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
        self.pending = b""
        self.ended = False

    async def next_line(self) -> str | None:
        """The next line without its newline; None after end of input (Ctrl-D)."""
        while b"\n" not in self.pending:
            if self.ended:
                rest, self.pending = self.pending, b""
                return rest.decode(errors="replace") if rest else None
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, READ_CHUNK_BYTES)
            except OSError:  # EIO: the terminal was closed (hung up); nothing more can be typed
                chunk = b""
            if not chunk:
                self.ended = True
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode(errors="replace")


async def chat(path: Path, *, chat_id: str, timeout_s: float, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    interactive = stdin.isatty()
    lines = [] if interactive else [line.rstrip("\n") for line in stdin if line.strip()]
    stream = await _connect(path, CONNECT_WAIT_S)
    async with stream:
        session = ChatSession(stream, out, err)
        await session.send(Hello(chat_id=chat_id))
        if interactive:
            print(f"connected to the console channel ({path}); Ctrl-D or Ctrl-C to leave", file=err)
            return await run_interactive(session, stdin)
        return await run_piped(session, lines, timeout_s)


def command_chat(args: argparse.Namespace) -> int:
    from orchestrator.cli.locate import state_dir
    from shared.settings import ConfigError

    if args.agent:
        try:
            load_config(args.config).agent(args.agent)
        except ConfigError as exc:
            return fail(str(exc))
    state = state_dir(args.config)
    for warning in _warnings(state):
        print(f"WARNING: {warning}", file=sys.stderr)
    try:
        return anyio.run(
            lambda: chat(
                console_socket(state),
                chat_id=args.chat_id,
                timeout_s=args.timeout,
                stdin=sys.stdin,
                out=sys.stdout,
                err=sys.stderr,
            )
        )
    except ConnectionError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return EXIT_OK


def _warnings(state: Path) -> list[str]:
    """The running daemon's standing warnings (dangerous mode), shown each time a chat opens."""
    from orchestrator.control import ask_status, control_path

    async def status() -> dict[str, Any]:
        return await ask_status(control_path(state), timeout=5)

    try:
        answer = anyio.run(status)
    except (OSError, TimeoutError, ValueError):
        return []
    warnings = answer.get("warnings", [])
    return [str(w) for w in warnings] if isinstance(warnings, list) else []
