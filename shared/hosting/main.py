"""The whole ``__main__`` of a server: ``python -m PACKAGE [--http HOST:PORT]``, logging to stderr."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mcp.server import MCPServer

from shared.hosting.errors import HostingError, startup_failure
from shared.hosting.options import http_options_from_env
from shared.hosting.serve import run
from shared.hosting.tokens import token_source


def configure_logging(level: str = "INFO") -> None:
    """Structured-enough logs on stderr: stdout belongs to JSON-RPC under stdio."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def server_main(
    name: str,
    build: Callable[[], MCPServer[Any]],
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """The whole ``__main__`` of a server: ``python -m PACKAGE [--http HOST:PORT]``."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=f"Run the {name} MCP server.")
    parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio")
    parser.add_argument(
        "--log-level", default=None, help="DEBUG, INFO, WARNING (default from NEXO_LOG_LEVEL)"
    )
    args = parser.parse_args(argv)
    environ = os.environ if env is None else env
    try:
        options = http_options_from_env(args.http, environ, name) if args.http else None
        server = build()
    except Exception as exc:  # noqa: BLE001 -- the process boundary: report and exit 1
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    configure_logging(args.log_level or environ.get("NEXO_LOG_LEVEL", "WARNING"))
    source = token_source(environ, name)

    def announce(url: str) -> None:
        print(f"{name}: serving MCP over HTTP at {url} ({source.describe()})", file=sys.stderr, flush=True)

    try:
        run(server, http=options, announce=announce)
    except (HostingError, BaseExceptionGroup) as exc:
        failure = startup_failure(exc)
        if failure is None:
            raise
        print(f"{name}: {failure}", file=sys.stderr)
        return 1
    return 0
