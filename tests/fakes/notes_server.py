"""A third-party-style MCP server with a side effect, for approval scenarios.

``write_note`` appends a line to the file named by ``NOTES_FILE`` (not read-only, so the gate must ask);
``read_notes`` is read-only and runs without asking. Run as ``python -m tests.fakes.notes_server``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp_types import ToolAnnotations

from shared.hosting.main import server_main


def build_server(path: Path) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("notes", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def write_note(text: str) -> str:
        """Append one line to the operator's notes file."""
        with path.open("a", encoding="utf-8") as notes:
            notes.write(text + "\n")
        return f"wrote {len(text)} characters"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_notes() -> str:
        """The notes file's content."""
        return path.read_text(encoding="utf-8") if path.exists() else ""

    return server


def main() -> int:
    return server_main("tests.fakes.notes_server", lambda: build_server(Path(os.environ["NOTES_FILE"])))


if __name__ == "__main__":
    sys.exit(main())
