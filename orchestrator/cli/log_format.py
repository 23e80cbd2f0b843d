"""The orchestrator's log lines: text in the servers' own format, or one JSON object per line."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
"""The servers' own format (shared.hosting.main.configure_logging), date included: their lines land in the
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
