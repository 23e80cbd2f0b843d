"""Backend failures as tool errors: the MCP client's model reads them and can tell its person."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from orchestrator.mcpserver.backend import BackendError, NeedsDaemon


@contextmanager
def as_tool_errors() -> Iterator[None]:
    try:
        yield
    except (BackendError, NeedsDaemon) as exc:
        raise ToolError(str(exc)) from exc
