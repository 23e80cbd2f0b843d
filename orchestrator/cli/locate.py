"""Where the running orchestrator listens, found without validating the config.

The one-shot commands that talk to a running ``nexo run`` (``nexo status``, ``nexo chat``, ``nexo agent
run`` and friends) need only the state directory, which holds the control and console sockets.
Validating the whole config would import every model behind it (the mesh, the model clients, the
permission policy, the MCP types) and cost a second of CPU before the first byte is sent. The
running daemon's record gives the directory without even a YAML parse; without one, the config's
``state_dir`` is read by the same rules as the full load (``orchestrator/state_location.py``). A
config neither can read is loaded in full instead, which reports every problem with its fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.cli.common import config_path, load_config
from orchestrator.state_location import find_running, read_state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def state_dir(value: str | None, env: Mapping[str, str] | None = None) -> Path:
    """The state directory of the config named by ``--config`` (or ``$NEXO_CONFIG``, or the built-in
    defaults); SystemExit(1) after printing every problem when the config cannot be loaded."""
    environ = os.environ if env is None else env
    path = config_path(value)
    running = find_running(path, environ)
    if running is not None:
        return running
    located = read_state_dir(path, environ)
    if located is not None:
        return located.state_dir
    config = load_config(value)
    found: Path = config.state_path
    return found
