"""``nexo chat`` says one sentence when the console refuses a message or goes away, never a traceback."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from orchestrator.cli.main import main
from orchestrator.sockets import console_path
from shared import unix_socket
from shared.protocol.console_wire import MAX_FRAME_BYTES, Error, Welcome, encode
from shared.unix_socket import UnixStream
from tests.mesh.harness import write_config

pytestmark = pytest.mark.anyio

REFUSAL = "not stored: the disk holding /state/console/console.db is full. Fix: free space on that filesystem"
WAIT_S = 20

Answer = Callable[[UnixStream], Awaitable[None]]


async def refuse(stream: UnixStream) -> None:
    await stream.send(encode(Error(message=REFUSAL)))


async def hang_up(stream: UnixStream) -> None:
    await stream.aclose()


async def chat_against(tmp_path: Path, answer: Answer, monkeypatch: pytest.MonkeyPatch) -> int:
    """`nexo chat` with one piped line, against a console that greets and then answers with `answer`."""
    state = tmp_path / "state"
    config = write_config(tmp_path / "nexo.yaml", state_dir=state, llm_base_url="http://127.0.0.1:9/v1")
    path = console_path(state)
    path.parent.mkdir(parents=True)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))

    async def serve(stream: UnixStream) -> None:
        async with stream:
            reader = BufferedByteReceiveStream(stream)
            await reader.receive_until(b"\n", MAX_FRAME_BYTES)  # hello
            await stream.send(encode(Welcome(server="console", chat_id="operator")))
            await reader.receive_until(b"\n", MAX_FRAME_BYTES)  # the message
            await answer(stream)

    with anyio.fail_after(WAIT_S):
        async with await unix_socket.listen(path) as listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            code = await anyio.to_thread.run_sync(main, ["chat", "--config", str(config)])
            tg.cancel_scope.cancel()
    return code


async def test_a_message_the_console_refuses_is_one_sentence_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await chat_against(tmp_path, refuse, monkeypatch)
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", f"nexo chat: {REFUSAL}\n")


async def test_a_console_that_goes_away_mid_message_is_one_sentence_naming_nexo_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = await chat_against(tmp_path, hang_up, monkeypatch)
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == (
        "nexo: the console channel closed the connection (its server stopped or is restarting); "
        "run `nexo status` to see why, then `nexo chat` again\n"
    )
