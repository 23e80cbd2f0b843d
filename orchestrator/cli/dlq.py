"""``nexo dlq list | replay SERVER:SEQ | purge``: messages set aside after repeated failures."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import EXIT_OK, fail, load_config, print_json

if TYPE_CHECKING:
    from orchestrator.mesh.forkserver import ForkServer

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"
DAEMON_TIMEOUT_S = 30.0


def add_dlq_parser(sub: Any) -> None:
    dlq = sub.add_parser("dlq", help="dead letters: messages set aside after their handling kept failing")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True, metavar="SUBCOMMAND")
    listing = dlq_sub.add_parser("list", help="the dead letters of every channel server")
    replay = dlq_sub.add_parser("replay", help="hand one back to the agent")
    replay.add_argument("target", metavar="SERVER:SEQ", help="as `nexo dlq list` shows it")
    purge = dlq_sub.add_parser("purge", help="drop dead letters for good")
    for parser in (listing, replay, purge):
        parser.add_argument("--config", help=CONFIG_HELP)
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    for parser in (listing, purge):
        parser.add_argument("--server", help="only this channel server")


def command_dlq(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"action": args.dlq_command, "server": getattr(args, "server", None)}
    if args.dlq_command == "replay":
        request["target"] = args.target
    # The running daemon owns the channel servers: it is found from the state directory alone, and
    # the config is loaded (every model behind it imported) only when none runs.
    from orchestrator.cli.running import answer_if_running

    answer = answer_if_running(args.config, {"op": "dlq", **request}, DAEMON_TIMEOUT_S)
    if answer is None:
        answer = _started_here(load_config(args.config), request)
    if "error" in answer:
        return fail(str(answer["error"]))
    if args.json:
        print_json(answer)
    elif "dead" in answer:
        _print_dead(answer["dead"])
    elif "replayed" in answer:
        print(f"replayed {answer['replayed']}: the agent will handle it again")
    else:
        print(f"purged {answer['purged']} dead letters")
    return EXIT_OK


def _started_here(config: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The answer of the bound channel servers, started here (forked from a template of this
    command when no daemon listens)."""
    from orchestrator.child_env import child_env
    from orchestrator.cli.direct import started_unless_running

    bound = {name for agent in config.agents for name in agent.channels}
    servers = {name: server for name, server in config.servers.items() if name in bound}
    with started_unless_running(config, servers, child_env(config)) as forked:
        answer: dict[str, Any] = anyio.run(_ask, config, servers, request, forked)
    return answer


async def _ask(
    config: Any, servers: dict[str, Any], request: dict[str, Any], fork_server: ForkServer | None
) -> dict[str, Any]:
    """The bound channel servers ``servers`` started here (forked from ``fork_server`` when there is
    one) and asked."""
    from orchestrator.child_env import child_env
    from orchestrator.dlq import channel_connections, dlq
    from orchestrator.mesh import Mesh

    mesh = Mesh(servers, config.supervision, base_env=child_env(config), fork_server=fork_server or False)
    async with mesh:
        missing = await mesh.wait_ready(30.0)
        if missing:
            print(f"nexo: not reachable: {', '.join(missing)}", file=sys.stderr)
        return await dlq(channel_connections(mesh.connections), request)


def _print_dead(dead: list[dict[str, Any]]) -> None:
    if not dead:
        print("no dead letters")
        return
    for event in dead:
        when = datetime.fromtimestamp(event["dead_at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        content = str(event["payload"].get("content", ""))
        preview = " ".join(content.split())[:60]
        print(f"{event['server']}:{event['seq']}  {when}  {event['kind']}  {preview!r}")
        print(f"    {event['reason']}")
