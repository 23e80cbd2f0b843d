"""What the orchestrator tells every server it starts."""

from __future__ import annotations

from pathlib import Path

from orchestrator.child_env import child_env
from orchestrator.config.nexo import NexoConfig


def _config(tmp_path: Path, workspace_env: dict[str, str]) -> NexoConfig:
    return NexoConfig.model_validate(
        {
            "state_dir": str(tmp_path),
            "servers": {
                "workspace": {"transport": "stdio", "command": "x", "env": workspace_env},
                "chat": {"transport": "stdio", "command": "x"},
            },
            "llm": {"providers": {"p": {"kind": "openai_compat", "base_url": "http://h/v1", "model": "m"}}},
            "agents": [{"id": "a", "model": {"provider": "p"}, "channels": ["chat"]}],
            "channels": {"enabled": True, "approved": [{"server": "chat"}]},
        }
    )


def test_the_orchestrator_tells_channels_a_custom_workspace_root(tmp_path: Path) -> None:
    custom = child_env(_config(tmp_path, {"NEXO_WORKSPACE_ROOT": str(tmp_path / "agent-files")}))
    default = child_env(_config(tmp_path, {}))
    assert custom["NEXO_WORKSPACE_ROOT"] == str(tmp_path / "agent-files")
    assert "NEXO_WORKSPACE_ROOT" not in default
