"""What ``nexo chat`` shows and sends, whichever loop moves the bytes.

Two clients speak the console's socket protocol: the standalone ``nexo chat`` (blocking sockets and
``selectors``, ``orchestrator/cli/chat.py``) and the chat inside ``nexo run --chat`` (the daemon's
event loop, ``orchestrator/cli/chat_loop.py``). Both cut bytes into frames with the protocol's own
:class:`LineSplitter` and hand every frame and typed line to the classes here, so a person sees the
same lines from either.
"""

from __future__ import annotations

import os

from orchestrator.cli.common import EXIT_FAIL
from shared.protocol.console_wire import (
    Approval,
    Error,
    FrameError,
    LineSplitter,
    Reply,
    Say,
    ServerFrame,
    Verdict,
    decode_server,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

CONNECT_WAIT_S = 30.0
"""How long ``nexo chat`` waits for a console that is still starting."""
CONNECT_RETRY_FAST_S = 0.01
CONNECT_RETRY_S = 0.1
CONNECT_FAST_FOR_S = 2.0
"""While a console is starting, its socket is tried again every CONNECT_RETRY_FAST_S for the first
CONNECT_FAST_FOR_S (a daemon just started, as after a restart, opens it within that: each try is
one failed connect, a few microseconds), then every CONNECT_RETRY_S."""
READ_CHUNK_BYTES = 64 * 1024


class ConsoleClosed(ConnectionError):
    """The console channel ended the connection: one sentence for the person, never a traceback."""

    def __init__(self) -> None:
        super().__init__(
            "the console channel closed the connection (its server stopped or is restarting); "
            "run `nexo status` to see why, then `nexo chat` again"
        )


class ConsoleGarbled(ConnectionError):
    """The console channel sent something that is not a frame."""

    def __init__(self, problem: FrameError) -> None:
        super().__init__(
            f"the console channel sent a line that is not a frame ({problem}); is another program "
            "listening on its socket? Run `nexo status`, then `nexo chat` again"
        )


def connect_retry_delay(waited_s: float) -> float:
    """Seconds before trying a console's socket again, ``waited_s`` into the wait."""
    return CONNECT_RETRY_FAST_S if waited_s < CONNECT_FAST_FOR_S else CONNECT_RETRY_S


def no_console(path: Path) -> ConnectionError:
    return ConnectionError(f"no console channel is listening on {path}; start the agent with `nexo run`")


def not_permitted(path: Path) -> ConnectionError:
    return ConnectionError(
        f"this user may not open the console channel's socket {path}: the state directory "
        "is private to the user that runs `nexo run`. Run `nexo chat` as that user (a "
        "directory an earlier run left unusable is repaired by the next `nexo run`)"
    )


def new_message_id() -> str:
    return os.urandom(16).hex()


def frames_in(splitter: LineSplitter, chunk: bytes) -> list[ServerFrame]:
    """The frames ``chunk`` completes; an empty chunk (the console hung up) raises ConsoleClosed."""
    if not chunk:
        raise ConsoleClosed
    try:
        return [decode_server(line) for line in splitter.feed(chunk)]
    except FrameError as exc:
        raise ConsoleGarbled(exc) from None


class Approvals:
    """Approval requests shown in this chat, newest last."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.shown: list[str] = []

    def show(self, frame: Approval) -> None:
        self.shown.append(frame.request_id)
        print(
            f"\n[approval {frame.request_id}] {frame.tool_name} {frame.input_preview}\n"
            f"  {frame.description}\n  answer: yes {frame.request_id} | no {frame.request_id}",
            file=self.err,
            flush=True,
        )


WAITING, ANSWERED, FAILED = "waiting", "answered", "failed"


class PipedChat:
    """Lines from a pipe, each sent after the reply to the one before: what each frame means."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.approvals = Approvals(err)

    def on_frame(self, frame: ServerFrame, awaiting: str) -> str:
        """WAITING for more, ANSWERED (the reply to the message ``awaiting``) or FAILED."""
        if isinstance(frame, Reply) and frame.notice:
            print(frame.text, file=self.err, flush=True)
        elif isinstance(frame, Reply):
            print(frame.text, file=self.out, flush=True)
            if frame.reply_to == awaiting:
                return ANSWERED
        elif isinstance(frame, Approval):
            self.approvals.show(frame)
        elif isinstance(frame, Error):
            print(f"nexo chat: {frame.message}", file=self.err, flush=True)
            if not frame.message.startswith(("no pending", "bad frame")):
                return FAILED
        return WAITING

    def timed_out(self, timeout_s: float) -> int:
        print(f"nexo chat: no reply within {timeout_s:g}s; the message stays queued", file=self.err)
        return EXIT_FAIL


class InteractiveChat:
    """A person at a terminal: frames are shown as they come, typed lines become messages."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.approvals = Approvals(err)

    def greet(self, path: Path) -> None:
        print(f"connected to the console channel ({path}); Ctrl-D or Ctrl-C to leave", file=self.err)

    def show(self, frame: ServerFrame) -> None:
        if isinstance(frame, Reply):
            prefix = "·" if frame.notice else "nexo>"
            print(f"\n{prefix} {frame.text}\n", file=self.out, flush=True)
        elif isinstance(frame, Approval):
            self.approvals.show(frame)
        elif isinstance(frame, Verdict):
            print(f"[{frame.behavior} recorded for {frame.request_id}]", file=self.err, flush=True)
        elif isinstance(frame, Error):
            print(f"[error] {frame.message}", file=self.err, flush=True)

    def closed(self, problem: ConnectionError, *, while_sending: bool = False) -> None:
        lead = "" if while_sending else "\n"  # a reply may be mid-screen; a typed line ended its own
        print(f"{lead}[console closed] {problem}", file=self.err)

    def say(self, line: bytes) -> Say | None:
        """The message for one typed line; None for a blank one."""
        text = line.decode(errors="replace").strip()
        if not text:
            return None
        # A bare y/n answers the only open approval.
        if text.lower() in ("y", "yes", "n", "no") and len(self.approvals.shown) == 1:
            text = f"{text} {self.approvals.shown.pop()}"
        try:
            return Say(id=new_message_id(), text=text)
        except FrameError as exc:
            print(f"[not sent] {exc}", file=self.err, flush=True)
            return None
