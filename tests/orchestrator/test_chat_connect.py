"""``nexo chat`` started beside a daemon that is still starting: the console's socket is tried again
every 10 ms for the first two seconds (a restart opens it within that), then every 100 ms."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from orchestrator.cli import chat
from orchestrator.cli.chat_loop import connect
from orchestrator.cli.chat_view import connect_retry_delay


def test_the_retry_is_fast_while_a_daemon_may_be_starting_then_slow() -> None:
    assert [connect_retry_delay(waited) for waited in (0.0, 1.99, 2.0, 29.0)] == [0.01, 0.01, 0.1, 0.1]


class StartingConsole:
    """A clock the chat client sleeps on, and a console that starts listening after ``tries`` sleeps."""

    def __init__(self, path: Path, tries: int) -> None:
        self.path = path
        self.tries = tries
        self.now = 0.0
        self.slept: list[float] = []
        self.listener: socket.socket | None = None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, delay: float) -> None:
        self.slept.append(delay)
        self.now += delay
        if len(self.slept) == self.tries:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(str(self.path))
            self.listener.listen()


def test_the_blocking_client_connects_once_the_console_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = StartingConsole(tmp_path / "console.sock", tries=3)
    monkeypatch.setattr(chat, "time", SimpleNamespace(monotonic=console.monotonic, sleep=console.sleep))
    try:
        with chat.Console.connect(console.path, 30.0):
            pass
    finally:
        if console.listener is not None:
            console.listener.close()
    assert console.slept == [0.01, 0.01, 0.01]


@pytest.mark.anyio
async def test_the_client_inside_nexo_run_chat_uses_the_same_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = StartingConsole(tmp_path / "console.sock", tries=2)

    async def sleep(delay: float) -> None:
        console.sleep(delay)

    monkeypatch.setattr(anyio, "sleep", sleep)  # what chat_loop.connect waits with
    try:
        stream = await connect(console.path, 30.0)
        await stream.aclose()
    finally:
        if console.listener is not None:
            console.listener.close()
    assert console.slept == [0.01, 0.01]
