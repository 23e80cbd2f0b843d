"""``nexo doctor capabilities`` and ``nexo setup doctor``: exit 0 clean, 2 warnings only, 1 errors."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import load_config, print_json, setup_logging

if TYPE_CHECKING:
    from collections.abc import Collection

    from orchestrator.config.nexo import NexoConfig
    from orchestrator.doctor import Finding
    from orchestrator.mesh import ServerConnection
    from orchestrator.mesh.config import ServerConfig
    from orchestrator.mesh.forkserver import ForkServer
    from orchestrator.setup_doctor import SetupFacts

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
        parser.add_argument(
            "--json", action="store_true", help="print the findings as JSON, with error and warning counts"
        )


def _report(findings: list[Finding], as_json: bool, clean: str) -> int:
    from orchestrator.doctor import as_json as to_json
    from orchestrator.doctor import exit_code

    if as_json:
        print_json(to_json(findings))
        return exit_code(findings)
    for finding in findings:
        print(finding.line())
    if all(finding.level == "info" for finding in findings):
        print(clean)
    return exit_code(findings)


def command_doctor(args: argparse.Namespace) -> int:
    from orchestrator.doctor import capabilities

    setup_logging("WARNING")
    config = load_config(args.config)
    return _report(capabilities(config), args.json, "nothing risky is armed")


def command_setup_doctor(args: argparse.Namespace) -> int:
    from orchestrator.child_env import child_env
    from orchestrator.claude_plugins import plugin_findings
    from orchestrator.cli.direct import started_unless_running
    from orchestrator.setup_doctor import setup
    from orchestrator.storage_report import storage_findings

    config = load_config(args.config)
    # With no daemon, every server gather() asks is started here: forked from a template of this
    # command, each as its connection opens (their stderr is kept for the report).
    wanted = {name: config.servers[name] for name in _asked(config, _bound(config)) if name in config.servers}
    with started_unless_running(config, wanted, child_env(config), start=False) as forked:
        facts = anyio.run(gather, config, forked)
    storage = storage_findings(config.state_path, _daemon_status(config))
    plugins = [
        f for name, caps in sorted(facts.capabilities.items()) for f in plugin_findings(config, name, caps)
    ]
    return _report(setup(config, facts) + plugins + storage, args.json, "pairing and policies are consistent")


def _daemon_status(config: NexoConfig) -> dict[str, Any] | None:
    """What the running daemon reports (it knows which servers found their disk full), or None."""
    from orchestrator.control import ask_status
    from orchestrator.sockets import control_path

    async def status() -> dict[str, Any]:
        return await ask_status(control_path(config.state_path), timeout=5)

    try:
        return anyio.run(status)
    except (OSError, TimeoutError, ValueError):
        return None


async def gather(config: NexoConfig, fork_server: ForkServer | None = None) -> SetupFacts:
    """Ask the pairing server, each workspace server and each bound channel server. Those the running
    daemon holds are asked through the daemon (a second copy of a channel could not take its socket
    or port; one of the others would only take seconds to start); the others are started here, like
    `nexo audit` does, built-in ones forked from ``fork_server`` when given."""
    from orchestrator.cli.check import running_status
    from orchestrator.control import ask
    from orchestrator.setup_doctor import SetupFacts
    from orchestrator.sockets import control_path

    facts = SetupFacts()
    channels = _bound(config)
    held: dict[str, dict[str, Any]] = {}
    connected: set[str] = set()
    status = await running_status(config)
    if status is not None:
        try:
            answer = await ask(control_path(config.state_path), {"op": "channels"})
        except (OSError, TimeoutError):
            answer = {}  # it stopped in between: start the servers here after all
        servers: dict[str, dict[str, Any]] = answer.get("servers", {})
        held = {name: info for name, info in servers.items() if name in channels}
        connected = {name for name, info in servers.items() if info.get("capabilities") is not None}
        if held:
            facts.through = f"the running nexo (pid {status['pid']}, config {status['config']})"
    for name, info in held.items():
        if info.get("capabilities") is None:
            facts.unreachable[name] = str(info.get("error") or "not connected")
            continue
        facts.outbound_tools[name] = set(info.get("tools") or ())
        _note_relay(config, facts, name, tuple(info["capabilities"]))
    # The workspace and pairing servers the daemon holds are asked through it too.
    asked = {name for name in _asked(config, set()) if name in connected}
    answered = {name for name in sorted(asked) if await _ask_held(config, facts, name)}
    await _gather_started(config, facts, channels - set(held), fork_server, answered)
    return facts


async def _ask_held(config: NexoConfig, facts: SetupFacts, name: str) -> bool:
    """Ask ``name`` (a workspace or the pairing server the running nexo holds) through the daemon's
    control socket; False when the daemon could not be asked (it is then started here)."""
    from orchestrator.control import ask
    from orchestrator.setup_doctor import PairedSender
    from orchestrator.sockets import control_path
    from shared.protocol.pairing_methods import LIST_METHOD

    path = control_path(config.state_path)
    try:
        if runs_workspace(config.servers[name]):
            request = {"op": "tool", "server": name, "tool": "workspace_info", "arguments": {}}
            info = (await ask(path, request, timeout=REACH_TIMEOUT_S)).get("result")
            if isinstance(info, dict) and info.get("shell") is False:
                facts.shell_unavailable[name] = str(info.get("warning") or "the shell tool is not offered")
        if name == config.pairing.server:
            request = {"op": "request", "server": name, "method": LIST_METHOD, "params": {}}
            listed = (await ask(path, request, timeout=REACH_TIMEOUT_S)).get("result")
            if isinstance(listed, dict):
                records = listed["records"]
                facts.paired = [
                    PairedSender(r["channel"], r["account"], r["scope"], r["sender"], r["role"])
                    for r in records
                ]
                facts.pending = len(listed["pending"])
    except (OSError, TimeoutError):
        return False
    return True


def _bound(config: NexoConfig) -> set[str]:
    """The channel servers some agent is bound to."""
    return {name for agent in config.agents for name in agent.channels}


def _asked(config: NexoConfig, channels: set[str]) -> list[str]:
    """The servers asked here besides those the running nexo holds: ``channels``, every workspace
    server (whether it offers a shell; a second copy is harmless) and the pairing server."""
    workspaces = {name for name, server in config.servers.items() if runs_workspace(server)}
    return sorted(channels | workspaces | ({config.pairing.server} & set(config.servers)))


async def _gather_started(
    config: NexoConfig,
    facts: SetupFacts,
    channels: set[str],
    fork_server: ForkServer | None,
    answered: Collection[str] = (),
) -> None:
    """Start the servers the running nexo does not hold (all of them when none runs) and ask them,
    built-in ones forked from ``fork_server`` when there is one; ``answered``: those the daemon
    answered for already."""
    names = [name for name in _asked(config, channels) if name not in answered]
    if not names:
        return  # without importing the mesh and the SDK (a second of CPU)
    from orchestrator.child_env import child_env
    from orchestrator.cli.direct import ready
    from orchestrator.mesh import Mesh
    from orchestrator.setup_doctor import PairedSender
    from shared.protocol import pairing as p

    workspaces = {name for name, server in config.servers.items() if runs_workspace(server)}
    servers = {name: config.servers[name] for name in names if name in config.servers}
    mesh = Mesh(
        servers,
        config.supervision,
        base_env=child_env(config),
        keep_stderr=True,
        fork_server=fork_server or False,
    )
    async with mesh:
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
            if name in workspaces:
                why = await shell_unavailable(connection)
                if why is not None:
                    facts.shell_unavailable[name] = why
            if name in channels:
                facts.outbound_tools[name] = {tool.name for tool in connection.tools}
                _note_relay(config, facts, name, connection.capability_names())
            if name == config.pairing.server:
                with contextlib.suppress(Exception):
                    listed = await connection.request(
                        p.ListRequest(params=p.ListParams()), p.ListResult, timeout=REACH_TIMEOUT_S
                    )
                    facts.paired = [
                        PairedSender(r.channel, r.account, r.scope, r.sender, r.role) for r in listed.records
                    ]
                    facts.pending = len(listed.pending)


def _note_relay(config: NexoConfig, facts: SetupFacts, name: str, capabilities: tuple[str, ...]) -> None:
    """Whether approvals reach ``name``: nexo's contract, or Claude Code's where the operator allowed it."""
    facts.capabilities[name] = capabilities
    claude = "claude/channel/permission" in capabilities and config.channel(name).claude_permission_relay
    if "nexo/channel/permission" in capabilities or claude:
        facts.relay_capable.add(name)


def runs_workspace(server: ServerConfig) -> bool:
    """Whether a configured server is the built-in workspace server (``python -m servers.workspace``
    or ``nexo serve workspace`` over stdio)."""
    from orchestrator.mesh.config import StdioServerConfig

    if not isinstance(server, StdioServerConfig):
        return False
    args = server.args
    return "servers.workspace" in args or args[-2:] == ["serve", "workspace"]


async def shell_unavailable(connection: ServerConnection) -> str | None:
    """Why the workspace server offers no shell (its ``workspace_info`` says), or None."""
    from mcp.shared.exceptions import MCPError

    from orchestrator.mesh import ServerUnavailable

    if "workspace_info" not in {tool.name for tool in connection.tools}:
        return None
    with contextlib.suppress(ServerUnavailable, MCPError):
        result = await connection.call_tool("workspace_info", {}, timeout=REACH_TIMEOUT_S)
        info = result.structured_content or {}
        if info.get("shell") is False:
            return str(info.get("warning") or "the shell tool is not offered")
    return None
