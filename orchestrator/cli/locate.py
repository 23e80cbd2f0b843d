"""Where the running orchestrator listens, read from the config without validating all of it.

The one-shot commands that talk to a running ``nexo run`` (``nexo status``, ``nexo chat``, ``nexo agent
run`` and friends) need only the state directory, which holds the control and console sockets.
Validating the whole config would import every model behind it (the mesh, the model clients, the
permission policy, the MCP types) and cost a second of CPU before the first byte is sent. The state
directory is read by the same rules as the full load: the file (or the built-in defaults) and its
``${...}`` interpolation (``NEXO_STATE_DIR`` is no override: it counts only where the file refers to
it, as the defaults do). A config this cannot read is loaded in full instead, which reports every
problem with its fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from orchestrator.cli.common import config_path, load_config
from orchestrator.defaults import BUILT_IN_LABEL, DEFAULT_STATE_DIR, default_config_text
from shared.settings import ConfigError, interpolate, parse_yaml

STATE_DIR_KEY = "state_dir"


def _quick_state_dir(path: Path | None, env: Mapping[str, str]) -> Path | None:
    """The state directory by the full load's rules; None when the config needs the full load's
    error reporting (unreadable file, bad YAML, a reference that does not resolve, a non-text value)."""
    try:
        if path is None:
            file, text, base_dir = BUILT_IN_LABEL, default_config_text(), Path.cwd()
        else:
            file, text, base_dir = str(path), path.read_text(encoding="utf-8"), path.parent
        data = parse_yaml(text, file)
        only = {STATE_DIR_KEY: data[STATE_DIR_KEY]} if STATE_DIR_KEY in data else {}
        only = interpolate(only, env=env, base_dir=base_dir, file=file)
    except (OSError, UnicodeDecodeError, ConfigError):
        return None
    value = only.get(STATE_DIR_KEY, DEFAULT_STATE_DIR)
    if not isinstance(value, str | Path) or not str(value):
        return None
    return Path(value).expanduser()


def state_dir(value: str | None, env: Mapping[str, str] | None = None) -> Path:
    """The state directory of the config named by ``--config`` (or ``$NEXO_CONFIG``, or the built-in
    defaults); SystemExit(1) after printing every problem when the config cannot be loaded."""
    environ = os.environ if env is None else env
    quick = _quick_state_dir(config_path(value), environ)
    if quick is not None:
        return quick
    config = load_config(value)
    found: Path = config.state_path
    return found
