"""``nexo status``: what the running orchestrator reports about each server."""

from __future__ import annotations

import argparse
import sys

import anyio

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_WARN, load_config, print_json
from orchestrator.control import ask_status, control_path


def command_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    path = control_path(config.state_path)
    try:
        status = anyio.run(ask_status, path)
    except (OSError, TimeoutError) as exc:
        message = (
            f"nexo is not running on {config.state_path} ({exc.__class__.__name__}); start it with `nexo run`"
        )
        if args.json:
            print_json({"running": False, "error": message})
        else:
            print(f"nexo: {message}", file=sys.stderr)
        return EXIT_FAIL
    status["running"] = True
    degraded = [s for s in status["servers"] if s["state"] != "ready"]
    if args.json:
        print_json(status)
    else:
        print(f"nexo pid {status['pid']}  up {status['uptime_s']}s  config {status['config']}")
        print(f"{'SERVER':<12} {'TRANSPORT':<9} {'STATE':<9} {'TOOLS':>5}  LAST ERROR")
        for server in status["servers"]:
            error = server["last_error"] or "-"
            name, transport, state, tools = (
                server["name"],
                server["transport"],
                server["state"],
                server["tools"],
            )
            print(f"{name:<12} {transport:<9} {state:<9} {tools:>5}  {error}")
        for agent in status["agents"]:
            channels = ", ".join(agent["channels"]) or "-"
            print(
                f"agent {agent['id']}: {agent['provider']}; channels {channels}; handled {agent['handled']}"
            )
    return EXIT_WARN if degraded else EXIT_OK
