"""What every command shares: config loading with clear errors, exit codes, JSON output."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `nexo chat` imports this module, and typing costs it
    from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_WARN = 0, 1, 2
EXIT_USAGE = 64
"""A command line argparse cannot parse (sysexits' EX_USAGE): not 2, which means "warnings only"."""


def fail(message: str) -> int:
    """Report an error to the person at the terminal: exit 1, and any tool or method name a server
    put in ``message`` for its model replaced by the ``nexo`` command to run."""
    from orchestrator.cli.wording import for_person

    print(f"nexo: {for_person(message)}", file=sys.stderr)
    return EXIT_FAIL


def config_path(value: str | None) -> Path | None:
    raw = value or os.environ.get("NEXO_CONFIG")
    return Path(raw) if raw else None


def load_config(value: str | None) -> Any:
    """The validated config, or SystemExit(1) after printing every problem to stderr."""
    from orchestrator.config.loading import load
    from shared.settings import ConfigError

    try:
        return load(config_path(value))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(EXIT_FAIL) from None


def config_label(value: str | None) -> str:
    path = config_path(value)
    return str(path) if path else "<built-in defaults>"


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def setup_logging(level: str, fmt: str = "text") -> None:
    """The orchestrator's log on stderr (``log_format.py``: imported only by the commands that log)."""
    from orchestrator.cli.log_format import setup_logging as setup

    setup(level, fmt)
