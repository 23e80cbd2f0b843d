"""``nexo status``: what the running orchestrator reports about each server."""

from __future__ import annotations

import argparse

import anyio

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_WARN, load_config, print_json
from orchestrator.control import ask_status, control_path


def command_status(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    path = control_path(config.state_path)
    try:
        status = anyio.run(ask_status, path)
    except (OSError, TimeoutError) as exc:
        message = f"nexo is not running on {config.state_path} ({exc.__class__.__name__}); start it with `nexo run`"
        if args.json:
            print_json({"running": False, "error": message})
        else:
            print(f"nexo: {message}", file=__import__("sys").stderr)
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
            print(f"{server['name']:<12} {server['transport']:<9} {server['state']:<9} {server['tools']:>5}  {error}")
        for agent in status["agents"]:
            print(f"agent {agent['id']}: {agent['provider']}; channels {', '.join(agent['channels']) or '-'}; handled {agent['handled']}")
    return EXIT_WARN if degraded else EXIT_OK
