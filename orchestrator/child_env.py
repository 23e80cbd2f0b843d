"""The environment every server the orchestrator (or a one-shot command) starts is given."""

from __future__ import annotations

import os

from orchestrator.config.nexo import NexoConfig, workspace_root


def child_env(config: NexoConfig) -> dict[str, str]:
    env = {
        "NEXO_STATE_DIR": str(config.state_path),
        "NEXO_LOG_LEVEL": os.environ.get("NEXO_LOG_LEVEL", "WARNING"),
    }
    workspace = workspace_root(config)
    if workspace != config.state_path / "workspace":
        # Channels save received files into, and send files from, the workspace server's root.
        env["NEXO_WORKSPACE_ROOT"] = str(workspace)
    return env
