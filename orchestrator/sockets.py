"""The Unix sockets nexo keeps under the state directory, by name: importable alone (no event loop
library), because ``nexo chat`` and ``nexo status`` open them before anything else."""

from __future__ import annotations

from pathlib import Path

CONTROL_SOCKET = "orchestrator.sock"
"""Where ``nexo status`` and the other one-shot commands ask the running daemon."""
CONSOLE_SOCKET = "console/console.sock"
"""Where ``nexo chat`` talks to the console channel, when it runs as the daemon's child."""


def control_path(state_dir: Path) -> Path:
    return state_dir / CONTROL_SOCKET


def console_path(state_dir: Path) -> Path:
    return state_dir / CONSOLE_SOCKET
