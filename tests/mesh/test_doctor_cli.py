"""`nexo doctor capabilities` and `nexo setup doctor` as real processes: exit codes 0/1/2 and JSON.

The setup doctor starts the real pairing server and a real channel server (the socket-driven inbox
of tests/fakes), so what it reports about pairings and tools comes from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.mesh.harness import nexo, python_server, running, write_config
from tests.mesh.inbox import inbox_server

pytestmark = [pytest.mark.scenario]

NO_LLM = "http://127.0.0.1:9/v1"


def _config(
    tmp_path: Path, name: str = "agents.yaml", *, inbox: dict[str, Any] | None = None, **agent: Any
) -> Path:
    return write_config(
        tmp_path / name,
        state_dir=tmp_path / "state",
        llm_base_url=NO_LLM,
        servers={
            "inbox": inbox_server(tmp_path),
            "pairing": python_server("servers.pairing"),
        },
        agent={"channels": ["inbox"], **agent},
        extra={
            "operator": {"channel": "inbox", "chat_id": "op"},
            "channel_options": {
                "inbox": {"pairing": {"policy": "pairing", "allow_from": []}, **(inbox or {})}
            },
        },
    )


def _doctor(config: Path, *command: str) -> tuple[int, dict[str, Any]]:
    result = nexo(*command, "--config", str(config), "--json", timeout=60)
    assert result.returncode in (0, 1, 2), result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, document


def _rows(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["level"], f["check"], f["subject"]) for f in document["findings"]]


def test_capabilities_exits_0_when_nothing_is_armed_and_2_on_warnings(tmp_path: Path) -> None:
    calm = _config(tmp_path)
    assert _doctor(calm, "doctor", "capabilities") == (0, {"findings": [], "errors": 0, "warnings": 0})
    plain = nexo("doctor", "capabilities", "--config", str(calm))
    assert (plain.returncode, plain.stdout) == (0, "nothing risky is armed\n")

    armed = _config(
        tmp_path, "armed.yaml", inbox={"pairing": {"policy": "open"}}, permissions={"dangerous_mode": True}
    )
    code, document = _doctor(armed, "doctor", "capabilities")
    assert code == 2
    assert _rows(document) == [
        ("warning", "dangerous_mode", "agents.nexo"),
        ("warning", "pairing.open", "inbox"),
    ]
    assert (document["errors"], document["warnings"]) == (0, 2)
    plain = nexo("doctor", "capabilities", "--config", str(armed))
    assert plain.returncode == 2
    assert plain.stdout.splitlines()[0].startswith("WARNING dangerous_mode")


@pytest.mark.timeout(
    300
)  # six nexo processes, each importing the mesh: near the default 120 s on a loaded machine
def test_setup_doctor_sees_seeded_pairings_and_the_channel_tools(tmp_path: Path) -> None:
    config = _config(tmp_path)
    code, document = _doctor(config, "setup", "doctor")
    assert (code, _rows(document)) == (2, [("warning", "pairing.coverage", "inbox:default")])

    seeded = nexo("pair", "seed", "inbox", "default", "alice-1", "--owner", "--config", str(config))
    assert seeded.returncode == 0, seeded.stderr
    assert _doctor(config, "setup", "doctor") == (0, {"findings": [], "errors": 0, "warnings": 0})

    left = nexo("pair", "seed", "old", "default", "bob", "--config", str(config))
    assert left.returncode == 0, left.stderr
    code, document = _doctor(config, "setup", "doctor")
    assert (code, _rows(document)) == (2, [("warning", "pairing.stale", "old:default")])
    assert document["findings"][0]["detail"] == "bob is paired on a channel no agent is bound to"

    # The outbound tool is checked against what the channel server really offers.
    wrong = _config(tmp_path, "wrong.yaml", inbox={"outbound_tool_name": "post"})
    code, document = _doctor(wrong, "setup", "doctor")
    assert code == 1
    assert _rows(document) == [
        ("error", "pairing.reply", "inbox:default"),
        ("warning", "pairing.stale", "old:default"),
    ]
    assert "send_message" in document["findings"][0]["fix"]
    assert (document["errors"], document["warnings"]) == (1, 1)


def test_setup_doctor_says_how_to_install_bubblewrap_when_the_agent_has_no_shell(tmp_path: Path) -> None:
    workspace = python_server("servers.workspace")
    workspace["env"] = {"NEXO_WORKSPACE_BWRAP": "/nonexistent/bwrap"}
    config = write_config(
        tmp_path / "agents.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=NO_LLM,
        servers={"workspace": workspace},
        agent={"channels": []},
        extra={"operator": {"channel": "workspace", "chat_id": "op"}},
    )
    code, document = _doctor(config, "setup", "doctor")
    [finding] = [f for f in document["findings"] if f["check"] == "sandbox"]
    # The operator's channel is no channel server here, which is a warning of its own.
    assert (code, _rows(document)) == (
        2,
        [("warning", "operator.channel", "workspace"), ("warning", "sandbox", "workspace")],
    )
    assert (finding["level"], finding["subject"]) == ("warning", "workspace")
    assert finding["detail"].startswith(
        "the agent has no shell: the shell tool is not offered: bubblewrap cannot sandbox commands "
        "('/nonexistent/bwrap' is not an executable on PATH)"
    )
    assert finding["fix"] == "install bubblewrap with `sudo apt-get install bubblewrap` and restart nexo"


def _live_config(tmp_path: Path, **more: dict[str, Any]) -> Path:
    """A console (allowlist: the operator) and a pairing server, and ``more`` servers, for a daemon."""
    return write_config(
        tmp_path / "live.yaml",
        state_dir=tmp_path / "state",
        llm_base_url=NO_LLM,
        servers={
            "console": python_server("channel_servers.console"),
            "pairing": python_server("servers.pairing"),
            **more,
        },
        extra={
            "channel_options": {"console": {"pairing": {"policy": "allowlist", "allow_from": ["operator"]}}}
        },
    )


def test_check_config_and_setup_doctor_check_through_a_running_daemon(tmp_path: Path) -> None:
    config = _live_config(tmp_path)
    with running(config) as orchestrator:
        checked = nexo("run", "--check-config", "--config", str(config), timeout=120)
        doctor = nexo("setup", "doctor", "--config", str(config), timeout=120)
        pid = orchestrator.process.pid
    assert (checked.returncode, checked.stdout) == (
        0,
        f"{config}: ok (2 servers reachable; 2 of them checked through the running nexo, pid {pid}, which "
        "holds them)\n",
    )
    assert "Traceback" not in checked.stderr
    assert (doctor.returncode, doctor.stdout.splitlines()) == (
        0,
        [
            f"INFO    live                     channels: asked through the running nexo (pid {pid}, config "
            f"{config}), which holds the servers",
            "pairing and policies are consistent",
        ],
    )
    assert "Traceback" not in doctor.stderr


def test_setup_doctor_asks_the_running_daemon_for_its_workspace_and_pairings_and_starts_no_server(
    tmp_path: Path,
) -> None:
    workspace = python_server("servers.workspace")
    workspace["env"] = {"NEXO_WORKSPACE_BWRAP": "/nonexistent/bwrap"}
    config = _live_config(tmp_path, workspace=workspace)
    with running(config) as orchestrator:
        seeded = nexo("pair", "seed", "old", "default", "bob", "--config", str(config))
        code, document = _doctor(config, "setup", "doctor")
        plain = nexo("setup", "doctor", "--config", str(config), timeout=120)
        pid = orchestrator.process.pid
    assert seeded.returncode == 0, seeded.stderr
    # The workspace's answer (no shell) and the pairings (bob's, stale) came through the daemon.
    assert (code, _rows(document)) == (
        2,
        [
            ("warning", "pairing.stale", "old:default"),
            ("warning", "sandbox", "workspace"),
            ("info", "live", "channels"),
        ],
    )
    assert document["findings"][0]["detail"] == "bob is paired on a channel no agent is bound to"
    assert document["findings"][1]["detail"].startswith(
        "the agent has no shell: the shell tool is not offered: bubblewrap cannot sandbox commands"
    )
    assert str(pid) in document["findings"][2]["detail"]
    # Nothing was started here: a server of its own says it is ready on stderr (log level INFO).
    assert plain.returncode == 2
    assert "ready:" not in plain.stderr, plain.stderr
