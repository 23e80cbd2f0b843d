"""``nexo serve NAME``: run one built-in server alone, e.g. for compose or another MCP client."""

from __future__ import annotations

import argparse
import os
import sys

from orchestrator.cli.common import fail

BUILT_IN = {
    "audit": "servers.audit",
    "console": "channel_servers.console",
    "cron": "servers.cron",
    "memory": "servers.memory",
    "pairing": "servers.pairing",
    "sample": "channel_servers.sample",
    "time": "servers.time",
    "webhook": "channel_servers.webhook",
    "workspace": "servers.workspace",
}


def command_serve(args: argparse.Namespace) -> int:  # noqa: RET503 -- execv does not return
    module = BUILT_IN.get(args.name)
    if module is None:
        return fail(f"no built-in server {args.name!r}; choose one of: {', '.join(sorted(BUILT_IN))}")
    argv = [sys.executable, "-m", module]
    if args.http:
        argv += ["--http", args.http]
    sys.stdout.flush()
    # The server runs as its own process image: the orchestrator never imports a server's code.
    os.execv(sys.executable, argv)  # noqa: S606
