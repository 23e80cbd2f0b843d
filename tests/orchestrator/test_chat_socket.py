"""``nexo chat`` run by a user who may not open the console's socket gets a sentence, not a traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
import pytest

from orchestrator.cli.chat import Console
from orchestrator.cli.chat_loop import ChatSession, connect
from orchestrator.sockets import console_path
from tests.orchestrator.another_user import answer_as_nobody, reachable_tmp

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")

EXPECTED = (
    "this user may not open the console channel's socket {path}: the state directory is private "
    "to the user that runs `nexo run`. Run `nexo chat` as that user (a directory an earlier run "
    "left unusable is repaired by the next `nexo run`)"
)


def test_a_console_socket_in_another_users_private_directory_is_a_clear_error() -> None:
    """The same sentence from the standalone client and from the one inside ``nexo run --chat``."""

    def connect_blocking(path: Path) -> str:
        try:
            Console.connect(path, 1.0)
        except ConnectionError as exc:
            return str(exc)
        return "connected"

    async def connect_in_loop(path: Path) -> str:
        try:
            ChatSession(await connect(path, 1.0))
        except ConnectionError as exc:
            return str(exc)
        return "connected"

    with reachable_tmp() as tmp:
        state = tmp / "state"
        path = console_path(state)
        path.parent.mkdir(parents=True, mode=0o700)
        state.chmod(0o700)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
            listener.listen()
            blocking = answer_as_nobody(lambda: connect_blocking(path))
            in_loop = answer_as_nobody(lambda: anyio.run(connect_in_loop, path))
    assert blocking == in_loop == EXPECTED.format(path=path)
