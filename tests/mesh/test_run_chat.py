"""``make run`` as a person uses it: ``nexo run --chat`` on a terminal with the default mesh.

The terminal carries the conversation and what the person must act on; the daemon's log goes to
``<state>/nexo.log``; one Ctrl-C ends chat and mesh within seconds, with no traceback and nothing left.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.mesh.harness import base_env
from tests.mesh.terminal import CTRL_C, nexo_run_chat, processes_of

pytestmark = pytest.mark.scenario

PROMPT = "Ctrl-D or Ctrl-C to leave"
STOP_WITHIN_S = 15.0
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR) ", re.MULTILINE)


def _env(state: Path, llm_url: str) -> dict[str, str]:
    env = base_env({"NEXO_STATE_DIR": str(state), "NEXO_LLM_BASE_URL": llm_url, "HOME": str(state.parent)})
    env.pop("NEXO_LOG_LEVEL")
    env.pop("NEXO_CONFIG", None)
    return env


def _closed_port() -> int:
    """A loopback port nothing listens on: the model is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_the_terminal_keeps_the_conversation_and_one_ctrl_c_ends_chat_and_mesh(tmp_path: Path) -> None:
    """The model is down: the chat says so, the retries are one line on the terminal and every line in
    the log file, and one Ctrl-C with the message still queued stops everything within seconds."""
    state = tmp_path / "state"
    with nexo_run_chat(_env(state, f"http://127.0.0.1:{_closed_port()}/v1")) as term:
        term.wait_for(PROMPT)
        term.type(b"hello?\n")
        term.wait_for("Your message is queued")
        term.type(CTRL_C)
        status = term.wait_exit(STOP_WITHIN_S)
    log = (state / "nexo.log").read_text()
    retries = r"LLM provider 'local' attempt \d/5 failed"
    assert status == 0, term.text
    assert "Traceback" not in term.text
    assert processes_of(state) == []
    assert LOG_LINE.findall(term.text) == []
    assert len(re.findall(retries, term.text)) == 1
    assert len(re.findall(retries, log)) >= 4
    assert f"starting 7 servers; the log is in {state / 'nexo.log'}" in term.text
    assert term.text.rstrip().endswith(f"nexo: stopped; the log is in {state / 'nexo.log'}")
    assert "nexo ready: 7 servers" in log
    assert "server memory ready" in log
    assert "received SIGINT: shutting down" in log


def _log(state: Path) -> str:
    try:
        return (state / "nexo.log").read_text()
    except FileNotFoundError:
        return ""


START_STAGES: dict[str, Callable[[Path], bool]] = {
    "the first line is out": lambda state: True,
    "the template is forked": lambda state: len(processes_of(state)) >= 2,
    "the servers are asked for": lambda state: len(processes_of(state)) >= 3,
    "the event loop runs": lambda state: _log(state) != "",
    "the first server is ready": lambda state: re.search(r"server \w+ ready", _log(state)) is not None,
}
"""Each stage of a start, as seen from outside; a Ctrl-C there may land a little later, never earlier."""


@pytest.mark.parametrize("stage", START_STAGES)
def test_ctrl_c_while_the_mesh_is_still_starting_stops_it_without_a_traceback(
    stage: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with nexo_run_chat(_env(state, f"http://127.0.0.1:{_closed_port()}/v1")) as term:
        term.wait_for("starting 7 servers")
        term.wait_until(lambda: START_STAGES[stage](state), stage)
        term.type(CTRL_C)
        status = term.wait_exit(STOP_WITHIN_S)
    assert status == 0, term.text
    assert "Traceback" not in term.text + (state / "nexo.log").read_text()
    assert term.text.rstrip().endswith(f"nexo: stopped; the log is in {state / 'nexo.log'}")
    assert processes_of(state) == []
