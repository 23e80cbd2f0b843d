"""The built-in defaults (``defaults.yaml``) and the default state directory, importable alone."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DEFAULT_STATE_DIR = Path("~/.local/state/nexo")
BUILT_IN_LABEL = "<built-in defaults>"


def default_config_text() -> str:
    """The config used when no file is given: the console channel and the built-in servers."""
    return resources.files("orchestrator").joinpath("defaults.yaml").read_text()
