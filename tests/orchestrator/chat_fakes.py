"""A console channel's socket and a daemon's control socket, each speaking its real wire format, for
``nexo chat`` to talk to without a mesh."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.protocol.console_wire import (
    Hello,
    LineSplitter,
    Say,
    ServerFrame,
    Welcome,
    decode_client,
    encode,
)

Answer = Callable[[Say], list[ServerFrame] | None]
"""The frames that answer a say; None hangs up."""
WAIT_S = 20.0


def _listening(path: Path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(WAIT_S)
    return listener


def _stop(listener: socket.socket) -> None:
    """Wake a thread blocked in ``accept`` (closing alone does not, on Linux), then close."""
    with contextlib.suppress(OSError):  # never listened, or already shut
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()


class FakeConsole:
    """Greets each chat, then answers each ``say`` with what ``answer`` returns; ``on_hello`` frames
    (queued replies, open approvals) follow the welcome. Records every say."""

    def __init__(self, path: Path, answer: Answer, on_hello: list[ServerFrame] | None = None) -> None:
        self.listener = _listening(path)
        self.answer = answer
        self.on_hello = on_hello or []
        self.said: list[Say] = []
        self.chat_ids: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:  # closed before a chat came
            return
        with (
            connection,
            contextlib.suppress(ConnectionResetError, BrokenPipeError),
        ):  # the chat may leave first
            splitter = LineSplitter()
            while chunk := connection.recv(65536):
                for line in splitter.feed(chunk):
                    frame = decode_client(line)
                    if isinstance(frame, Hello):
                        self.chat_ids.append(frame.chat_id)
                        replies: list[ServerFrame] = [Welcome(server="console", chat_id=frame.chat_id)]
                        replies += self.on_hello
                    else:
                        self.said.append(frame)
                        answer = self.answer(frame)
                        if answer is None:
                            return
                        replies = answer
                    connection.sendall(b"".join(encode(reply) for reply in replies))

    def close(self) -> None:
        _stop(self.listener)
        self.thread.join(WAIT_S)


@contextmanager
def fake_console(
    path: Path, answer: Answer, on_hello: list[ServerFrame] | None = None
) -> Iterator[FakeConsole]:
    console = FakeConsole(path, answer, on_hello)
    try:
        yield console
    finally:
        console.close()


@contextmanager
def fake_daemon(path: Path, warnings: list[str]) -> Iterator[list[str]]:
    """A control socket that answers ``status`` with ``warnings``; yields the requests it got."""
    listener = _listening(path)
    requests: list[str] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                request = b""
                while not request.endswith(b"\n") and (chunk := connection.recv(4096)):
                    request += chunk
                requests.append(request.decode().strip())
                connection.sendall(json.dumps({"pid": 1, "warnings": warnings}).encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield requests
    finally:
        _stop(listener)
        thread.join(WAIT_S)
