"""``nexo run --chat`` keeps the terminal for the conversation: the log to a file, each problem once."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

from orchestrator.cli.run_log import TerminalNotices, log_file


def _logger(terminal: io.StringIO) -> logging.Logger:
    logger = logging.getLogger(f"tests.run_log.{id(terminal)}")
    logger.propagate = False
    logger.handlers[:] = [TerminalNotices(terminal)]
    logger.setLevel(logging.DEBUG)
    return logger


def test_a_retried_problem_is_one_line_and_each_distinct_problem_gets_its_own() -> None:
    terminal = io.StringIO()
    logger = _logger(terminal)
    for attempt, delay in ((1, 0.3), (2, 0.7), (3, 1.6)):
        logger.warning(
            "provider %r attempt %d/5 failed (%s); retrying in %.1fs", "local", attempt, "refused", delay
        )
    logger.warning("provider %r attempt %d/5 failed (%s); retrying in %.1fs", "claude", 1, "refused", 0.2)
    logger.warning("server %s is not ready yet (%s)", "memory", "starting")
    logger.info("server %s ready", "time")
    assert terminal.getvalue().splitlines() == [
        "nexo: provider 'local' attempt 1/5 failed (refused); retrying in 0.3s",
        "nexo: provider 'claude' attempt 1/5 failed (refused); retrying in 0.2s",
        "nexo: server memory is not ready yet (starting)",
    ]


def test_a_problem_is_shown_as_its_first_line_only() -> None:
    terminal = io.StringIO()
    _logger(terminal).error("audit: entries not sent\nTraceback (most recent call last):\n  ...")
    assert terminal.getvalue() == "nexo: audit: entries not sent\n"


DIVERT = """
import os, sys
from pathlib import Path
from orchestrator.cli.run_log import divert_stderr
terminal = divert_stderr(Path(sys.argv[1]))
print("to the log", file=sys.stderr, flush=True)
os.system("echo from a child process >&2")
print("to the terminal", file=terminal, flush=True)
"""


def test_stderr_and_every_child_go_to_the_log_file_and_the_terminal_stays_reachable(tmp_path: Path) -> None:
    path = log_file(tmp_path)
    path.write_text("the previous run\n")
    ran = subprocess.run(
        [sys.executable, "-c", DIVERT, str(path)], capture_output=True, text=True, check=True, timeout=60
    )
    assert ran.stderr == "to the terminal\n"
    assert path.read_text() == "to the log\nfrom a child process\n"
    assert path.with_name("nexo.log.1").read_text() == "the previous run\n"
    assert path.stat().st_mode & 0o777 == 0o600
