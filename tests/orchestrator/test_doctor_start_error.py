"""A channel server that cannot start says why in one line on stderr and exits: the doctors' own rows
carry that line with a FAIL (or error) verdict and the fix, in process against a real child."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.cli.main import main
from orchestrator.mesh import ServerConnection
from orchestrator.mesh.config import StdioServerConfig, SupervisionConfig
from orchestrator.mesh.stderr_tail import StderrTail
from tests.mesh.harness import write_config

REFUSAL = (
    "channel_servers.telegram: Telegram refused the bot token (Unauthorized): set "
    "NEXO_TELEGRAM_BOT_TOKEN to the token @BotFather gave (/token), then restart"
)


def _refusing_server() -> dict[str, Any]:
    """Logs a line, then says why it cannot start and exits before the MCP handshake."""
    code = f"import sys; print('starting', file=sys.stderr); sys.exit({REFUSAL!r})"
    return {"transport": "stdio", "command": sys.executable, "args": ["-c", code]}


def _config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url="http://127.0.0.1:9/v1",
        servers={"telegram": _refusing_server()},
        agent={"channels": ["telegram"]},
    )


def test_the_tail_keeps_the_last_non_empty_line_across_chunks() -> None:
    tail = StderrTail()
    tail.feed(b"first\nsec")
    tail.feed(b"ond\n\n  \n")
    assert tail.last_line == "second"
    tail.feed(b"unterminated")
    tail.finish()
    assert tail.last_line == "unterminated"
    tail.forget()
    assert tail.last_line is None


@pytest.mark.anyio
async def test_a_connection_that_keeps_stderr_reports_the_servers_own_start_error() -> None:
    config = StdioServerConfig.model_validate(_refusing_server())
    kept = ServerConnection("telegram", config, SupervisionConfig(), keep_stderr=True)
    plain = ServerConnection("telegram", config, SupervisionConfig())
    with anyio.fail_after(30):
        described = await kept.describe_once()
        without = await plain.describe_once()
    assert described == {"capabilities": None, "server_name": None, "error": REFUSAL, "failed": True}
    assert without["error"] != REFUSAL


def test_channel_doctor_fails_the_row_with_the_servers_reason_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    assert main(["channel", "doctor", "--config", str(config), "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result == {
        "server": "telegram",
        "agent": "nexo",
        "verdict": "fail",
        "kind": "start",
        "reason": f"the server failed to start or connect: {REFUSAL}",
        "fix": "correct servers.telegram (its env or command) as the message says, then run "
        "`nexo channel doctor` again",
    }


def test_setup_doctor_names_the_servers_start_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "doctor", "--config", str(_config(tmp_path)), "--json"]) == 1
    (reachable,) = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "reachable"]
    assert reachable == {
        "level": "error",
        "check": "reachable",
        "subject": "telegram",
        "detail": f"could not be reached: {REFUSAL}",
        "fix": "correct servers.telegram as the message says, then run `nexo setup doctor` again "
        "(`nexo status` shows a running nexo's view)",
    }
