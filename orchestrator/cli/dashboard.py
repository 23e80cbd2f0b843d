"""``nexo dashboard``: the running daemon's dashboard URL with a one-time login link."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from orchestrator.cli.common import EXIT_OK, fail, print_json


def add_dashboard_parser(sub: Any, config_help: str) -> None:
    dashboard = sub.add_parser("dashboard", help="print the dashboard's URL with a one-time login link")
    dashboard.add_argument("--config", help=config_help)
    dashboard.add_argument("--json", action="store_true", help="print the URL and link as JSON")


def command_dashboard(args: argparse.Namespace) -> int:
    from orchestrator.cli.running import NotAnswered, daemon_answer

    try:
        answer = daemon_answer(args.config, {"op": "dashboard_login", "operator": getpass.getuser()})
    except NotAnswered as exc:
        return fail(str(exc))
    if args.json:
        print_json(answer)
        return EXIT_OK
    print(f"dashboard: {answer['url']}")
    print(f"log in (once, within {answer['expires_in_s']:g} s): {answer['login_url']}")
    return EXIT_OK
