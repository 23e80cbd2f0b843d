"""``nexo chat`` run by a user who may not open the console's socket gets a sentence, not a traceback."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import anyio
import pytest

from orchestrator.cli.chat import chat, console_socket
from tests.orchestrator.another_user import answer_as_nobody, reachable_tmp

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")


def test_a_console_socket_in_another_users_private_directory_is_a_clear_error() -> None:
    async def connect(path: Path) -> str:
        try:
            await chat(
                path,
                chat_id="operator",
                timeout_s=1.0,
                stdin=io.StringIO(""),
                out=io.StringIO(),
                err=io.StringIO(),
            )
        except ConnectionError as exc:
            return str(exc)
        return "connected"

    with reachable_tmp() as tmp:
        state = tmp / "state"
        path = console_socket(state)
        path.parent.mkdir(parents=True, mode=0o700)
        state.chmod(0o700)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(path))
            listener.listen()
            message = answer_as_nobody(lambda: anyio.run(connect, path))
    assert message == (
        f"this user may not open the console channel's socket {path}: the state directory is private "
        "to the user that runs `nexo run`. Run `nexo chat` as that user (a directory an earlier run "
        "left unusable is repaired by the next `nexo run`)"
    )
