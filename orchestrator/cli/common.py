"""What every command shares: config loading with clear errors, exit codes, JSON output."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
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
    from orchestrator.config import load
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


TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
"""The servers' own format (shared.hosting.configure_logging), date included: their lines land in the
same stderr as the orchestrator's and must read the same."""

LOG_FIELDS = ("agent", "goal", "server", "tool", "binding")
"""Context a log call may pass in ``extra=``; JSON lines carry them as fields."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the context fields present."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in LOG_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("NEXO_LOG_LEVEL", level))
    # The SDK logs every request at INFO; keep our own lines readable.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    logging.getLogger("httpx2").setLevel(logging.WARNING)
