"""The standalone ``nexo chat``: a blocking client that shows the daemon's standing warnings before
anything else, keeps ``--timeout``'s meaning, and leaves on end of input, from a pipe or a terminal."""

from __future__ import annotations

import io
import os
import pty
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.cli.chat import chat
from orchestrator.sockets import console_path, control_path
from shared.protocol.console_wire import Approval, Queued, Reply, Say, ServerFrame, Verdict
from tests.mesh.harness import base_env, write_config
from tests.mesh.terminal import CTRL_C, CTRL_D, on_a_terminal
from tests.orchestrator.chat_fakes import WAIT_S, fake_console, fake_daemon

DANGER = "DANGEROUS MODE is on for agent nexo: tool calls run without asking"
APPROVAL = Approval(request_id="kmpqr", tool_name="shell", description="run it", input_preview='{"cmd":"ls"}')


def answer_each(say: Say) -> list[ServerFrame]:
    """Queued, a notice, a late reply to something else, then the reply to ``say``."""
    return [
        Queued(id=say.id, seq=1),
        Reply(message_id="n", text="the model is slow today", notice=True),
        Reply(message_id="late", text="late answer", reply_to="earlier"),
        Reply(message_id="r", text=f"you said {say.text}", reply_to=say.id),
    ]


def only_queue(say: Say) -> list[ServerFrame]:
    return [Queued(id=say.id, seq=1)]


def hang_up(say: Say) -> None:
    return None


def test_a_pipe_gets_the_warnings_first_then_each_reply_from_one_status_request(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out, err = io.StringIO(), io.StringIO()
    with (
        fake_daemon(control_path(state), [DANGER]) as requests,
        fake_console(console_path(state), answer_each) as console,
    ):
        code = chat(
            state, chat_id="ops", timeout_s=WAIT_S, terminal=None, lines=["hi", "again"], out=out, err=err
        )
    assert code == 0
    assert out.getvalue() == "late answer\nyou said hi\nlate answer\nyou said again\n"
    assert err.getvalue() == f"WARNING: {DANGER}\nthe model is slow today\nthe model is slow today\n"
    assert requests == ["status"]
    assert (console.chat_ids, [say.text for say in console.said]) == (["ops"], ["hi", "again"])


def test_without_a_daemon_the_chat_goes_on_with_no_warnings(tmp_path: Path) -> None:
    state = tmp_path / "state"
    screen = io.StringIO()
    with fake_console(console_path(state), answer_each):
        code = chat(
            state, chat_id="operator", timeout_s=WAIT_S, terminal=None, lines=["hi"], out=screen, err=screen
        )
    assert (code, screen.getvalue()) == (0, "the model is slow today\nlate answer\nyou said hi\n")


def test_an_empty_pipe_shows_the_warnings_sends_nothing_and_exits_0(tmp_path: Path) -> None:
    state = tmp_path / "state"
    screen = io.StringIO()
    with (
        fake_daemon(control_path(state), [DANGER]),
        fake_console(console_path(state), answer_each) as console,
    ):
        code = chat(
            state, chat_id="operator", timeout_s=WAIT_S, terminal=None, lines=[], out=screen, err=screen
        )
    assert (code, screen.getvalue(), console.said) == (0, f"WARNING: {DANGER}\n", [])


def test_no_reply_within_the_timeout_is_one_sentence_and_exit_1(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out, err = io.StringIO(), io.StringIO()
    with fake_console(console_path(state), only_queue) as console:
        code = chat(
            state,
            chat_id="operator",
            timeout_s=0.2,
            terminal=None,
            lines=["hi", "never sent"],
            out=out,
            err=err,
        )
    assert (code, out.getvalue()) == (1, "")
    assert err.getvalue() == "nexo chat: no reply within 0.2s; the message stays queued\n"
    assert [say.text for say in console.said] == ["hi"]


class Screen(io.StringIO):
    """What the chat printed, waited on from another thread."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def wait_for(self, text: str) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: text in self.getvalue(), WAIT_S):
                raise AssertionError(f"{text!r} never shown; the screen has:\n{self.getvalue()}")


@contextmanager
def terminal_pair() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: (what a person types into, what the chat reads)."""
    typed, read = pty.openpty()
    try:
        yield typed, read
    finally:
        os.close(typed)
        os.close(read)


def test_at_a_terminal_replies_show_as_they_come_a_bare_y_answers_the_one_approval_and_ctrl_d_leaves(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    screen = Screen()

    def answer(say: Say) -> list[ServerFrame]:
        if say.text == "y kmpqr":
            return [Verdict(request_id="kmpqr", behavior="allow")]
        return [Reply(message_id="r", text=f"you said {say.text}", reply_to=say.id)]

    codes: list[int] = []
    with (
        terminal_pair() as (typed, read),
        fake_daemon(control_path(state), [DANGER]),
        fake_console(console_path(state), answer, on_hello=[APPROVAL]) as console,
    ):
        chatting = threading.Thread(
            target=lambda: codes.append(
                chat(
                    state,
                    chat_id="operator",
                    timeout_s=WAIT_S,
                    terminal=read,
                    lines=[],
                    out=screen,
                    err=screen,
                )
            )
        )
        chatting.start()
        screen.wait_for("answer: yes kmpqr | no kmpqr")
        os.write(typed, b"hello\n\n")
        screen.wait_for("nexo> you said hello")
        os.write(typed, b"y\n")
        screen.wait_for("[allow recorded for kmpqr]")
        os.write(typed, CTRL_D)
        chatting.join(WAIT_S)
    assert codes == [0]
    assert [say.text for say in console.said] == ["hello", "y kmpqr"]  # the blank line is not sent
    greeting = f"connected to the console channel ({console_path(state)}); Ctrl-D or Ctrl-C to leave"
    assert screen.getvalue().startswith(f"WARNING: {DANGER}\n{greeting}\n")


def test_at_a_terminal_a_console_that_goes_away_is_one_line_and_exit_0(tmp_path: Path) -> None:
    state = tmp_path / "state"
    screen = Screen()
    codes: list[int] = []
    with terminal_pair() as (typed, read), fake_console(console_path(state), hang_up):
        chatting = threading.Thread(
            target=lambda: codes.append(
                chat(
                    state,
                    chat_id="operator",
                    timeout_s=WAIT_S,
                    terminal=read,
                    lines=[],
                    out=screen,
                    err=screen,
                )
            )
        )
        chatting.start()
        screen.wait_for("Ctrl-D or Ctrl-C to leave")
        os.write(typed, b"hello\n")
        chatting.join(WAIT_S)
    assert codes == [0]
    assert screen.getvalue().endswith(
        "\n[console closed] the console channel closed the connection (its server stopped or is "
        "restarting); run `nexo status` to see why, then `nexo chat` again\n"
    )


@pytest.mark.scenario
def test_ctrl_c_at_a_terminal_leaves_with_exit_0_and_no_traceback(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = write_config(tmp_path / "nexo.yaml", state_dir=state, llm_base_url="http://127.0.0.1:9/v1")
    argv = [sys.executable, "-m", "orchestrator.cli.main", "chat", "--config", str(config)]
    with fake_console(console_path(state), answer_each), on_a_terminal(argv, base_env()) as terminal:
        terminal.wait_for("Ctrl-D or Ctrl-C to leave")
        terminal.type(b"hi\n")
        terminal.wait_for("nexo> you said hi")
        terminal.type(CTRL_C)
        code = terminal.wait_exit(WAIT_S)
    assert code == 0
    assert "Traceback" not in terminal.text
