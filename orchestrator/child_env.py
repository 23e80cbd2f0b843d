"""The environment every server the orchestrator (or a one-shot command) starts is given."""

from __future__ import annotations

import os

from orchestrator.config import NexoConfig


def child_env(config: NexoConfig) -> dict[str, str]:
    return {
        "NEXO_STATE_DIR": str(config.state_path),
        "NEXO_LOG_LEVEL": os.environ.get("NEXO_LOG_LEVEL", "WARNING"),
    }
