"""``nexo run --check-config``: after the config loaded, reach every server once.

A server the running daemon already holds is checked through the daemon (``nexo status``'s view):
starting a second copy would fail on what the first one owns (the console's socket, a webhook's
port) and report a fault that is not there. Servers the daemon does not run are started here, all
at once; with no daemon, the built-in ones are forked from a template of this command
(``orchestrator.cli.direct``), as ``nexo pair`` and friends do.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_WARN, config_label, print_json

if TYPE_CHECKING:
    from orchestrator.mesh import ServerConnection
    from orchestrator.mesh.forkserver import ForkServer


async def running_status(config: Any) -> dict[str, Any] | None:
    """The running daemon's status on the config's state directory, or None when none runs."""
    from orchestrator.control import ask_status
    from orchestrator.sockets import control_path

    try:
        return await ask_status(control_path(config.state_path))
    except (OSError, TimeoutError):
        return None


async def check(config: Any, args: argparse.Namespace, fork_server: ForkServer | None = None) -> int:
    """Reach every server once: an unreachable one is an error naming its key path. Those the
    running daemon does not hold are started here, all at once, built-in ones forked from
    ``fork_server`` when given (``started_early``)."""
    from orchestrator.cli.direct import serving

    async with serving(fork_server):
        return await _check(config, args, fork_server)


async def _probed(
    config: Any, names: list[str], fork_server: ForkServer | None
) -> dict[str, tuple[ServerConnection, str | None]]:
    """Each of ``names`` connected once, all at once: the connection and why it failed (or None)."""
    from orchestrator.child_env import child_env
    from orchestrator.mesh import ServerConnection

    env = child_env(config)
    found: dict[str, tuple[ServerConnection, str | None]] = {}

    async def probe(connection: ServerConnection) -> None:
        found[connection.name] = (connection, await connection.probe())

    async with anyio.create_task_group() as tg:
        for name in names:
            server = config.servers[name]
            tg.start_soon(
                probe,
                ServerConnection(name, server, config.supervision, base_env=env, fork_server=fork_server),
            )
    return found


async def _check(config: Any, args: argparse.Namespace, fork_server: ForkServer | None) -> int:
    label = config_label(args.config)
    status = await running_status(config)
    live = {server["name"]: server for server in status["servers"]} if status else {}
    probed = await _probed(config, [name for name in config.servers if name not in live], fork_server)
    report: dict[str, Any] = {
        "config": label,
        "servers": {},
        "ok": True,
        "running": None if status is None else {"pid": status["pid"], "config": status["config"]},
    }
    for name, server in config.servers.items():
        if name in live:
            held = live[name]
            error = None if held["state"] == "ready" else (held["last_error"] or held["state"])
            report["servers"][name] = {
                "ok": error is None,
                "tools": held["tools"],
                "error": error,
                "live": True,
            }
            fix = "see `nexo status`; the running nexo keeps reconnecting it"
        else:
            connection, error = probed[name]
            report["servers"][name] = {
                "ok": error is None,
                "tools": len(connection.tools),
                "error": error,
                "live": False,
            }
            fix = (
                "start it or correct the url"
                if server.transport == "http"
                else "run the command by hand to see why"
            )
            if connection.refused is not None:
                # The server answered: the message says what it refused and carries its own fix.
                report["ok"] = False
                print(f"{label}: servers.{name}: {server.describe()}: {error}", file=sys.stderr)
                continue
        if error is not None:
            report["ok"] = False
            print(
                f"{label}: servers.{name}: cannot reach {server.describe()}: {error}. Fix: {fix}",
                file=sys.stderr,
            )
    for problem in await _poller_problems(config, report["servers"].get(config.cron.server), fork_server):
        report["ok"] = False
        report.setdefault("pollers", []).append(problem)
        print(f"{label}: {problem}", file=sys.stderr)
    warnings = _timing_warnings(config, label)
    report["warnings"] = warnings
    if args.json:
        print_json(report)
    elif report["ok"]:
        print(f"{label}: ok ({len(report['servers'])} servers reachable{_through(report)})")
    if not report["ok"]:
        return EXIT_FAIL
    return EXIT_WARN if warnings else EXIT_OK


def _timing_warnings(config: Any, label: str) -> list[str]:
    """Autonomy intervals the limits make impossible: the daemon would run them late."""
    from orchestrator.proactive.plan import config_timing_problems

    problems = config_timing_problems(config)
    for problem in problems:
        print(f"{label}: warning: {problem}", file=sys.stderr)
    return problems


async def _poller_problems(
    config: Any, cron: dict[str, Any] | None, fork_server: ForkServer | None
) -> list[str]:
    """The pollers the cron server refuses, asked of a copy started here. A cron server the running
    nexo holds is not started twice: that nexo's log names the refused pollers."""
    if cron is None or cron["live"] or not cron["ok"] or not any(a.pollers for a in config.agents):
        return []
    from orchestrator.child_env import child_env
    from orchestrator.mesh import ServerConnection
    from orchestrator.proactive.pollers import check_pollers

    server = config.servers[config.cron.server]
    connection = ServerConnection(
        config.cron.server, server, config.supervision, base_env=child_env(config), fork_server=fork_server
    )
    return await check_pollers(config, connection)


def _through(report: dict[str, Any]) -> str:
    held = sum(server["live"] for server in report["servers"].values())
    if not held:
        return ""
    pid = report["running"]["pid"]
    return f"; {held} of them checked through the running nexo, pid {pid}, which holds them"
