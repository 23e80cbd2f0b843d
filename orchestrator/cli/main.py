"""Entry point of the ``nexo`` command: argument parsing and dispatch only."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from orchestrator import gc_pause
from orchestrator.cli.common import EXIT_USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing would cost every command, `nexo chat` too
    from typing import Any, NoReturn

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"


class NexoArgumentParser(argparse.ArgumentParser):
    """Usage errors exit 64 (EX_USAGE of sysexits), so that 2 keeps meaning "warnings only"."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole ``nexo`` parser; with ``command``, only that command's part, so that running one
    command imports no other command's module (``main`` parses with this one)."""
    parser = NexoArgumentParser(
        prog="nexo", description="An autonomous personal agent built from MCP servers."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = COMMANDS.values() if command is None else [COMMANDS[command]]
    for add in dict.fromkeys(adders):
        add(sub)
    return parser


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="start the mesh and answer on every bound channel")
    run.add_argument("--config", help=CONFIG_HELP)
    run.add_argument(
        "--check-config", action="store_true", help="validate the config and reach every server, then exit"
    )
    run.add_argument("--chat", action="store_true", help="also open the console chat in this terminal")
    run.add_argument("--json", action="store_true", help="with --check-config: print the report as JSON")


def _add_chat(sub: Any) -> None:
    chat = sub.add_parser("chat", help="talk to the running agent through the console channel")
    chat.add_argument("--config", help=CONFIG_HELP)
    chat.add_argument("--agent", help="agent id (default: the first agent)")
    chat.add_argument("--chat-id", default="operator", help="conversation id (one session per chat id)")
    chat.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for each reply when piped"
    )


def _add_agent(sub: Any) -> None:
    agent = sub.add_parser("agent", help="run goals")
    agent_sub = agent.add_subparsers(dest="agent_command", required=True, metavar="SUBCOMMAND")
    agent_run = agent_sub.add_parser("run", help="run one goal in the foreground")
    agent_run.add_argument("prompt", help="what the agent should do, in words")
    agent_run.add_argument("--config", help=CONFIG_HELP)
    agent_run.add_argument("--agent", help="agent id (default: the first agent)")
    agent_run.add_argument("--json", action="store_true", help="print the outcome as JSON")
    agent_run.add_argument(
        "--yes", action="store_true", help="approve every tool call that would ask (careful)"
    )
    agent_run.add_argument(
        "--bg", action="store_true", help="hand the goal to the running daemon, print its id and return"
    )
    agent_cancel = agent_sub.add_parser("cancel", help="cancel a goal running in the daemon")
    agent_cancel.add_argument("goal", metavar="GOAL", help="goal id, as shown by `nexo agent ps`")
    agent_cancel.add_argument("--config", help=CONFIG_HELP)
    agent_cancel.add_argument("--json", action="store_true", help="print the outcome as JSON")

    from orchestrator.cli.goals import add_goal_subparsers

    add_goal_subparsers(agent_sub)


def _add_audit(sub: Any) -> None:
    from orchestrator.cli.audit import add_audit_parser

    add_audit_parser(sub)


def _add_memory(sub: Any) -> None:
    from orchestrator.cli.memory_args import add_memory_parser

    add_memory_parser(sub)


def _add_channel(sub: Any) -> None:
    from orchestrator.cli.channel import add_channel_parser

    add_channel_parser(sub)


def _add_dlq(sub: Any) -> None:
    from orchestrator.cli.dlq import add_dlq_parser

    add_dlq_parser(sub)


def _add_pair(sub: Any) -> None:
    from orchestrator.cli.pair import add_pair_parser

    add_pair_parser(sub)


def _add_cron_and_autonomy(sub: Any) -> None:
    from orchestrator.cli.cron import add_cron_parsers

    add_cron_parsers(sub)


def _add_doctor_and_setup(sub: Any) -> None:
    from orchestrator.cli.doctor import add_doctor_parsers

    add_doctor_parsers(sub)


def _add_mcp_server(sub: Any) -> None:
    from orchestrator.cli.mcp_server import add_mcp_server_parser

    add_mcp_server_parser(sub)


def _add_dashboard(sub: Any) -> None:
    from orchestrator.cli.dashboard import add_dashboard_parser

    add_dashboard_parser(sub, CONFIG_HELP)


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run one built-in server alone (stdio, or HTTP with --http)")
    serve.add_argument("name", help="audit, console, cron, memory, pairing, sample, time, webhook, workspace")
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help=(
            "serve Streamable HTTP; clients send a bearer token, taken from NEXO_SERVER_TOKEN, else from "
            "the 0600 file NEXO_SERVER_TOKEN_FILE names (created with a new token if missing), else "
            "generated into <NEXO_STATE_DIR>/http-tokens/NAME.token"
        ),
    )


def _add_status(sub: Any) -> None:
    status = sub.add_parser(
        "status", help="each server of the running orchestrator: state, tools, last error"
    )
    status.add_argument("--config", help=CONFIG_HELP)
    status.add_argument("--json", action="store_true", help="print the whole status as JSON")


COMMANDS: dict[str, Callable[[Any], None]] = {
    "run": _add_run,
    "chat": _add_chat,
    "agent": _add_agent,
    "audit": _add_audit,
    "memory": _add_memory,
    "channel": _add_channel,
    "dlq": _add_dlq,
    "pair": _add_pair,
    "cron": _add_cron_and_autonomy,
    "autonomy": _add_cron_and_autonomy,
    "doctor": _add_doctor_and_setup,
    "setup": _add_doctor_and_setup,
    "mcp-server": _add_mcp_server,
    "dashboard": _add_dashboard,
    "serve": _add_serve,
    "status": _add_status,
}
"""Each command's parser, in ``nexo --help`` order; a module that adds two commands is called once."""


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["run"] or words[:2] == ["agent", "run"]:
        # The commands that start servers: collection stays off until they are up (gc_pause).
        gc_pause.pause()
    try:
        # Only the named command's parser; help, no command or a typo get the whole one.
        command = words[0] if words and words[0] in COMMANDS else None
        code = _dispatch(build_parser(command).parse_args(words))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`nexo status --json | head`): no traceback, and no second error
        # when the interpreter flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        gc_pause.resume(freeze=False)  # a command that ended before its servers were up, if paused
    return code


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "dashboard":
        from orchestrator.cli.dashboard import command_dashboard

        return command_dashboard(args)
    if args.command == "run":
        from orchestrator.cli.run import command_run

        return command_run(args)
    if args.command == "chat":
        from orchestrator.cli.chat import command_chat

        return command_chat(args)
    if args.command == "agent" and args.agent_command in ("run", "cancel"):
        from orchestrator.cli.agent import command_agent_cancel, command_agent_run

        return command_agent_run(args) if args.agent_command == "run" else command_agent_cancel(args)
    if args.command == "agent":
        from orchestrator.cli.goals import command_goals

        return command_goals(args)
    if args.command == "audit":
        from orchestrator.cli.audit import command_audit

        return command_audit(args)
    if args.command == "cron":
        from orchestrator.cli.cron import command_cron

        return command_cron(args)
    if args.command == "autonomy":
        from orchestrator.cli.cron import command_autonomy

        return command_autonomy(args)
    if args.command == "doctor":
        from orchestrator.cli.doctor import command_doctor

        return command_doctor(args)
    if args.command == "setup":
        from orchestrator.cli.doctor import command_setup_doctor

        return command_setup_doctor(args)
    if args.command == "pair":
        from orchestrator.cli.pair import command_pair

        return command_pair(args)
    if args.command == "dlq":
        from orchestrator.cli.dlq import command_dlq

        return command_dlq(args)
    if args.command == "channel":
        from orchestrator.cli.channel import command_channel

        return command_channel(args)
    if args.command == "memory":
        from orchestrator.cli.memory_view import command_memory

        return command_memory(args)
    if args.command == "mcp-server":
        from orchestrator.cli.mcp_server import command_mcp_server

        return command_mcp_server(args)
    if args.command == "serve":
        from orchestrator.cli.serve import command_serve

        return command_serve(args)
    from orchestrator.cli.status import command_status

    return command_status(args)


if __name__ == "__main__":
    sys.exit(main())
