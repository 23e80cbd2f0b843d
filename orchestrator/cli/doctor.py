"""``nexo doctor capabilities`` and ``nexo setup doctor``: exit 0 clean, 2 warnings only, 1 errors."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import load_config, print_json, setup_logging

if TYPE_CHECKING:
    from orchestrator.config import NexoConfig
    from orchestrator.doctor import Finding, SetupFacts

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"
REACH_TIMEOUT_S = 20.0


def add_doctor_parsers(sub: Any) -> None:
    doctor = sub.add_parser("doctor", help="what is armed: risky knobs that are on")
    doctor_sub = doctor.add_subparsers(dest="doctor_command", required=True, metavar="SUBCOMMAND")
    capabilities = doctor_sub.add_parser(
        "capabilities", help="dangerous mode, auto-approve, open policies, binds without TLS, ..."
    )
    setup = sub.add_parser("setup", help="check the setup")
    setup_sub = setup.add_subparsers(dest="setup_command", required=True, metavar="SUBCOMMAND")
    setup_doctor = setup_sub.add_parser(
        "doctor", help="(channel, account) pairs, pairing policy consistency and coverage"
    )
    for parser in (capabilities, setup_doctor):
        parser.add_argument("--config", help=CONFIG_HELP)
        parser.add_argument("--json", action="store_true")


def _report(findings: list[Finding], as_json: bool, clean: str) -> int:
    from orchestrator.doctor import as_json as to_json
    from orchestrator.doctor import exit_code

    if as_json:
        print_json(to_json(findings))
    elif not findings:
        print(clean)
    else:
        for finding in findings:
            print(finding.line())
    return exit_code(findings)


def command_doctor(args: argparse.Namespace) -> int:
    from orchestrator.doctor import capabilities

    setup_logging("WARNING")
    config = load_config(args.config)
    return _report(capabilities(config), args.json, "nothing risky is armed")


def command_setup_doctor(args: argparse.Namespace) -> int:
    from orchestrator.doctor import setup
    from orchestrator.storage import storage_findings

    setup_logging("WARNING")
    config = load_config(args.config)
    facts = anyio.run(gather, config)
    storage = storage_findings(config.state_path, _daemon_status(config))
    return _report(setup(config, facts) + storage, args.json, "pairing and policies are consistent")


def _daemon_status(config: NexoConfig) -> dict[str, Any] | None:
    """What the running daemon reports (it knows which servers found their disk full), or None."""
    from orchestrator.control import ask_status, control_path

    async def status() -> dict[str, Any]:
        return await ask_status(control_path(config.state_path), timeout=5)

    try:
        return anyio.run(status)
    except (OSError, TimeoutError, ValueError):
        return None


async def gather(config: NexoConfig) -> SetupFacts:
    """Ask the pairing server and each bound channel server (started here, like `nexo audit`)."""
    from orchestrator.cli.direct import ready
    from orchestrator.daemon import child_env
    from orchestrator.doctor import PairedSender, SetupFacts
    from orchestrator.mesh import Mesh
    from shared.protocol import pairing as p

    facts = SetupFacts()
    channels = {name for agent in config.agents for name in agent.channels}
    names = sorted(channels | ({config.pairing.server} & set(config.servers)))
    servers = {name: config.servers[name] for name in names if name in config.servers}
    async with Mesh(servers, config.supervision, base_env=child_env(config)) as mesh:
        for name in names:
            connection = mesh.get(name)
            if connection is None:
                continue
            reached = False
            with anyio.move_on_after(REACH_TIMEOUT_S):
                reached = await ready(connection)
            if not reached:
                facts.unreachable[name] = connection.last_error or "no answer"
                continue
            if name in channels:
                facts.outbound_tools[name] = {tool.name for tool in connection.tools}
                if connection.has_capability("nexo/channel/permission"):
                    facts.relay_capable.add(name)
            if name == config.pairing.server:
                with contextlib.suppress(Exception):
                    listed = await connection.request(
                        p.ListRequest(params=p.ListParams()), p.ListResult, timeout=REACH_TIMEOUT_S
                    )
                    facts.paired = [
                        PairedSender(r.channel, r.account, r.scope, r.sender, r.role) for r in listed.records
                    ]
                    facts.pending = len(listed.pending)
    return facts
