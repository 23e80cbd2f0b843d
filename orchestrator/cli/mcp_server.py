"""``nexo mcp-server``: serve nexo itself to another MCP client, over stdio or Streamable HTTP."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, load_config

TIER_HELP = (
    "read (default): look things up; act: also run and cancel goals, remember and forget, change cron "
    "entries; admin: also approve and revoke pairings"
)
HTTP_HELP = (
    "serve Streamable HTTP instead of stdio; clients send a bearer token, taken from NEXO_SERVER_TOKEN, "
    "else from the 0600 file NEXO_SERVER_TOKEN_FILE names, else generated into "
    "<state_dir>/http-tokens/mcp-server.token"
)


def add_mcp_server_parser(sub: Any) -> None:
    parser = sub.add_parser("mcp-server", help="serve nexo itself as an MCP server to another MCP client")
    parser.add_argument("--config", help="YAML config (default: $NEXO_CONFIG or the built-in defaults)")
    parser.add_argument("--tier", choices=("read", "act", "admin"), default="read", help=TIER_HELP)
    parser.add_argument("--http", metavar="HOST:PORT", help=HTTP_HELP)


def command_mcp_server(args: argparse.Namespace) -> int:
    from orchestrator.mcpserver.backend import Backend
    from orchestrator.mcpserver.server import build_server
    from orchestrator.sockets import control_path
    from shared.hosting.errors import HostingError, startup_failure
    from shared.hosting.main import configure_logging
    from shared.hosting.options import http_options_from_env
    from shared.hosting.serve import run
    from shared.hosting.tokens import token_source as source_of

    config = load_config(args.config)
    env = {"NEXO_STATE_DIR": str(config.state_path), **os.environ}
    configure_logging(os.environ.get("NEXO_LOG_LEVEL", "WARNING"))
    try:
        options = http_options_from_env(args.http, env, "mcp-server") if args.http else None
    except HostingError as exc:
        print(f"nexo mcp-server: {exc}", file=sys.stderr)
        return EXIT_FAIL
    server = build_server(config, Backend(config, control_path(config.state_path)), args.tier)
    described = source_of(env, "mcp-server").describe()

    def announce(url: str) -> None:
        print(
            f"nexo mcp-server ({args.tier} tier): serving MCP over HTTP at {url} ({described})",
            file=sys.stderr,
            flush=True,
        )

    try:
        run(server, http=options, announce=announce)
    except (HostingError, BaseExceptionGroup) as exc:
        failure = startup_failure(exc)
        if failure is None:
            raise
        print(f"nexo mcp-server: {failure}", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK
