"""The orchestrator's text log and its servers' logs share one stderr, so they share one format."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from orchestrator.cli.common import setup_logging
from shared.hosting.main import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _line() -> str:
    """One warning as the root logger's handler writes it."""
    record = logging.LogRecord(
        "nexo.workspace", logging.WARNING, __file__, 1, "commands run unconfined", (), None
    )
    record.created, record.msecs = 1_764_104_478.093, 93.0
    formatter = logging.getLogger().handlers[0].formatter
    assert formatter is not None
    return formatter.format(record)


def test_a_server_warning_and_an_orchestrator_line_have_the_same_format() -> None:
    configure_logging("WARNING")
    server = _line()
    setup_logging("INFO", "text")
    orchestrator = _line()
    assert orchestrator == server
    assert orchestrator.endswith(",093 WARNING nexo.workspace commands run unconfined")
