"""A stdio server whose client vanished (a SIGKILLed orchestrator) exits with one line, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.scenario


def _line(message: dict[str, object]) -> str:
    return json.dumps(message) + "\n"


def test_an_answer_to_a_client_that_is_gone_ends_the_server_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXO_")}
    env.update(NEXO_STATE_DIR=str(tmp_path), NEXO_LOG_LEVEL="WARNING")
    process = subprocess.Popen(
        [sys.executable, "-m", "channel_servers.console"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "vanishing", "version": "0"},
    }
    process.stdin.write(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}))
    process.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    process.stdin.flush()
    answered = json.loads(process.stdout.readline())
    process.stdout.close()
    # A pull asked once the client's end of stdout is closed, as the pulls in flight of a killed nexo
    # are: its answer, however soon it comes, meets the closed pipe.
    pull = {"jsonrpc": "2.0", "id": 2, "method": "nexo/events/pull", "params": {"wait_ms": 1000}}
    process.stdin.write(_line(pull))
    process.stdin.flush()
    process.stdin.close()
    process.wait(timeout=30)
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read()
    assert answered["id"] == 1
    assert (process.returncode, stderr.splitlines()) == (
        0,
        ["console: the client that started this server is gone (its end of stdout closed); exiting"],
    )
