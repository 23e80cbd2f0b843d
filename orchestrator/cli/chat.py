"""``nexo chat``: the operator's terminal, connected to the console channel's Unix socket.

Interactive on a terminal; when stdin is piped, each line is sent in turn, each reply printed to
stdout, and the command exits after the reply to the last line.

A blocking client (sockets and ``selectors``, no event loop library), so that the command starts
about as fast as the interpreter. ``nexo run --chat`` runs the same chat inside the daemon's event
loop (``chat_loop.py``); both take frames, framing and what is printed from ``chat_view.py``.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from pathlib import Path

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
from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, fail, load_config
from orchestrator.sockets import console_path, control_path
from shared.protocol.console_wire import FrameError, Hello, LineSplitter, Say, ServerFrame, encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import TracebackType
    from typing import TextIO

WARNINGS_WAIT_S = 5.0
"""How long the daemon's standing warnings are waited for; without an answer the chat goes on."""
MAX_STATUS_BYTES = 1024 * 1024


class Console:
    """The console channel's socket, blocking; frames received ahead of their turn wait in ``ready``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.splitter = LineSplitter()
        self.ready: list[ServerFrame] = []

    @classmethod
    def connect(cls, path: Path, wait_s: float) -> Console:
        """Connect, waiting up to ``wait_s`` for a console that is still starting."""
        start = time.monotonic()
        deadline = start + wait_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(path))
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() >= deadline:
                    raise no_console(path) from None
                time.sleep(connect_retry_delay(time.monotonic() - start))
                continue
            except PermissionError:
                sock.close()
                raise not_permitted(path) from None
            except OSError as exc:
                sock.close()
                raise ConnectionError(
                    f"cannot open the console channel's socket {path}: {exc.strerror or exc}"
                ) from None
            return cls(sock)

    def __enter__(self) -> Console:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.sock.close()

    def send(self, frame: Hello | Say) -> None:
        try:
            self.sock.settimeout(None)
            self.sock.sendall(encode(frame))
        except OSError as exc:
            raise ConsoleClosed from exc

    def read(self) -> None:
        """Receive once (the socket is readable, or its timeout is set) into ``ready``."""
        try:
            chunk = self.sock.recv(READ_CHUNK_BYTES)
        except TimeoutError:
            raise
        except OSError as exc:
            raise ConsoleClosed from exc
        self.ready.extend(frames_in(self.splitter, chunk))

    def next_frame(self, deadline: float) -> ServerFrame | None:
        """The next frame, or None once ``deadline`` (``time.monotonic()``) has passed."""
        while not self.ready:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                self.read()
            except TimeoutError:
                return None
        return self.ready.pop(0)


class StandingWarnings:
    """The running daemon's standing warnings (dangerous mode), shown each time a chat opens.

    Asked for on the control socket before the chat's first message goes out and read after it, so
    the question costs no round trip of its own. No daemon, or no answer in time: nothing to show.
    """

    def __init__(self, path: Path) -> None:
        self.sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.deadline = time.monotonic() + WARNINGS_WAIT_S
        try:
            self.sock.settimeout(WARNINGS_WAIT_S)
            self.sock.connect(str(path))
            self.sock.sendall(b"status\n")
        except OSError:
            self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def show(self, err: TextIO) -> None:
        """Print them (once), after waiting for the answer if it has not come yet."""
        if self.sock is None:
            return
        try:
            answer = json.loads(self._answer(self.sock))
        except (OSError, ValueError):
            answer = None
        finally:
            self.close()
        warnings = answer.get("warnings") if isinstance(answer, dict) else None
        for warning in warnings if isinstance(warnings, list) else []:
            print(f"WARNING: {warning}", file=err)

    def _answer(self, sock: socket.socket) -> bytes:
        received = b""
        while not received.endswith(b"\n") and len(received) <= MAX_STATUS_BYTES:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            chunk = sock.recv(READ_CHUNK_BYTES)
            if not chunk:
                break
            received += chunk
        return received


def run_piped(
    console: Console, view: PipedChat, lines: list[str], timeout_s: float, warnings: StandingWarnings
) -> int:
    if not lines:
        warnings.show(view.err)
    for text in lines:
        message_id = new_message_id()
        console.send(Say(id=message_id, text=text))
        warnings.show(view.err)
        deadline = time.monotonic() + timeout_s
        while (frame := console.next_frame(deadline)) is not None:
            outcome = view.on_frame(frame, message_id)
            if outcome == FAILED:
                return EXIT_FAIL
            if outcome == ANSWERED:
                break
        else:
            return view.timed_out(timeout_s)
    return EXIT_OK


def run_interactive(console: Console, view: InteractiveChat, stdin_fd: int) -> int:
    """Until end of input (Ctrl-D) or the console goes away; Ctrl-C is the caller's."""
    terminal = LineSplitter(limit=None)
    console.sock.settimeout(None)
    with selectors.DefaultSelector() as selector:
        selector.register(console.sock, selectors.EVENT_READ, console)
        selector.register(stdin_fd, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.data is console:
                    try:
                        console.read()
                    except ConnectionError as exc:
                        view.closed(exc)
                        return EXIT_OK
                    while console.ready:
                        view.show(console.ready.pop(0))
                    continue
                try:
                    chunk = os.read(stdin_fd, READ_CHUNK_BYTES)
                except OSError:  # EIO: the terminal was closed (hung up); nothing more can be typed
                    chunk = b""
                typed = terminal.feed(chunk) if chunk else [terminal.rest()]
                for line in typed:
                    say = view.say(line)
                    if say is None:
                        continue
                    try:
                        console.send(say)
                    except ConsoleClosed as exc:
                        view.closed(exc, while_sending=True)
                        return EXIT_OK
                if not chunk:
                    return EXIT_OK


def chat(
    state_dir: Path,
    *,
    chat_id: str,
    timeout_s: float,
    terminal: int | None,
    lines: list[str],
    out: TextIO,
    err: TextIO,
) -> int:
    """A person typing at the file descriptor ``terminal``; without one, ``lines`` sent in turn."""
    warnings = StandingWarnings(control_path(state_dir))
    try:
        path = console_path(state_dir)
        with Console.connect(path, CONNECT_WAIT_S) as console:
            console.send(Hello(chat_id=chat_id))
            if terminal is None:
                return run_piped(console, PipedChat(out, err), lines, timeout_s, warnings)
            warnings.show(err)
            view = InteractiveChat(out, err)
            view.greet(path)
            return run_interactive(console, view, terminal)
    finally:
        warnings.close()


def command_chat(args: argparse.Namespace) -> int:
    from orchestrator.cli.locate import state_dir

    if args.agent:
        from shared.settings import ConfigError

        try:
            load_config(args.config).agent(args.agent)
        except ConfigError as exc:
            return fail(str(exc))
    state = state_dir(args.config)
    terminal = sys.stdin.fileno() if sys.stdin.isatty() else None
    try:
        lines = [] if terminal is not None else [line.rstrip("\n") for line in sys.stdin if line.strip()]
        return chat(
            state,
            chat_id=args.chat_id,
            timeout_s=args.timeout,
            terminal=terminal,
            lines=lines,
            out=sys.stdout,
            err=sys.stderr,
        )
    except ConnectionError as exc:
        return fail(str(exc))
    except FrameError as exc:
        return fail(f"a line was not sent: {exc}")
    except KeyboardInterrupt:
        return EXIT_OK
