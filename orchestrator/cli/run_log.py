"""``nexo run --chat``: the terminal is the conversation's, the daemon's log goes to a file.

Everything written to the process's stderr (the orchestrator's log, every stdio server's log, which
the servers inherit as their stderr) lands in ``<state_dir>/nexo.log``; the run before keeps its log
as ``nexo.log.1``. The terminal shows the conversation and each problem the person must act on,
once: a warning repeated by every retry is one line, the file keeps them all.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TextIO

LOG_NAME = "nexo.log"


def log_file(state_dir: Path) -> Path:
    return state_dir / LOG_NAME


def divert_stderr(path: Path) -> TextIO:
    """Point file descriptor 2 at ``path`` (mode 0600, the previous file kept as ``.1``) and return
    a stream to where stderr went before: the person's terminal."""
    if path.exists():
        path.replace(path.with_name(f"{path.name}.1"))
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stderr.flush()
    terminal_fd = os.dup(2)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    return open(terminal_fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace")


class TerminalNotices(logging.Handler):
    """Warnings and errors on the terminal, one line each, each problem once.

    A problem is the log call (logger and message template) with the names in its arguments;
    numbers (attempt counts, delays) may change from one retry to the next without making it new.
    """

    def __init__(self, terminal: TextIO) -> None:
        super().__init__(logging.WARNING)
        self.terminal = terminal
        self.shown: set[tuple[str, str, tuple[str, ...]]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        problem = (record.name, str(record.msg), tuple(a for a in args if isinstance(a, str)))
        if problem in self.shown:
            return
        self.shown.add(problem)
        try:
            first_line = record.getMessage().splitlines()[0] if record.getMessage() else ""
            self.terminal.write(f"nexo: {first_line}\n")
            self.terminal.flush()
        except (OSError, ValueError, TypeError):
            self.handleError(record)
