"""``nexo channel list | doctor | test``: which servers are channels and whether agents take them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.cli.common import EXIT_FAIL, EXIT_OK, EXIT_WARN, config_label, fail, load_config, print_json
from orchestrator.cli.status import refusal_lines

if TYPE_CHECKING:
    from orchestrator.mesh.forkserver import ForkServer

CONFIG_HELP = "YAML config (default: $NEXO_CONFIG or the built-in defaults)"
JSON_HELP = "print the report as JSON, with where it came from"


@dataclass(frozen=True)
class Source:
    """Where a channel report comes from: the running daemon (its config, its bindings), or the
    config file with each server started once for the check."""

    config: Any
    label: str
    pid: int | None = None
    bound: dict[str, list[str]] | None = None
    """Agent id -> channels, as the running daemon has them."""

    def as_dict(self) -> dict[str, Any]:
        return {"running": self.pid is not None, "pid": self.pid, "config": self.label}

    def line(self) -> str:
        if self.pid is None:
            return f"from {self.label}: nexo is not running, so each server was started once for this check"
        return f"from the running nexo (pid {self.pid}, config {self.label})"

    def agents_on(self, server: str) -> list[str]:
        if self.bound is None:
            return [a.id for a in self.config.agents if server in a.channels]
        return [agent for agent, channels in self.bound.items() if server in channels]


def add_channel_parser(sub: Any) -> None:
    channel = sub.add_parser("channel", help="channel servers: list them, check the gate, preview a message")
    channel_sub = channel.add_subparsers(dest="channel_command", required=True, metavar="SUBCOMMAND")
    listing = channel_sub.add_parser(
        "list", help="each channel server: capabilities and the agents bound to it"
    )
    listing.add_argument("--config", help=CONFIG_HELP)
    listing.add_argument("--json", action="store_true", help=JSON_HELP)
    doctor = channel_sub.add_parser(
        "doctor",
        help="per server and binding: WOULD REGISTER, SKIP (kind, reason) or NOT BOUND, with the fix",
    )
    doctor.add_argument("--config", help=CONFIG_HELP)
    doctor.add_argument("--binding", metavar="AGENT", help="only this agent's binding")
    doctor.add_argument("--json", action="store_true", help=JSON_HELP)
    test = channel_sub.add_parser(
        "test", help="the session key and the text the model would see for a message"
    )
    test.add_argument("server", help="the channel server's name under servers: in the config")
    test.add_argument("--config", help=CONFIG_HELP)
    test.add_argument("--content", default="hello from nexo channel test", help="the message text")
    test.add_argument("--chat-id", default="test-chat", help="the chat the message comes from")
    test.add_argument("--thread-id", help="a thread within the chat (thread-scoped sessions)")
    test.add_argument("--sender", default="test-user", help="the sender's platform id")
    test.add_argument(
        "--binding", metavar="AGENT", help="whose session scope to use (default: the first agent)"
    )
    test.add_argument("--json", action="store_true", help="print the session key and the text as JSON")


def command_channel(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.channel_command == "test":
        return _test(args, config)
    from orchestrator.child_env import child_env
    from orchestrator.cli.direct import started_unless_running

    try:
        # Each server's stderr is kept for the report: forked as its connection opens (start=False).
        with started_unless_running(config, config.servers, child_env(config), start=False) as forked:
            source, probe = anyio.run(_probe, config, config_label(args.config), forked)
    except OSError as exc:
        return fail(str(exc))
    print(source.line(), file=sys.stderr)
    if args.channel_command == "list":
        return _list(args, source, probe)
    return _doctor(args, source, probe, anyio.run(_refused, config))


async def _probe(
    config: Any, label: str, fork_server: ForkServer | None
) -> tuple[Source, dict[str, dict[str, Any]]]:
    """Capabilities of every server: from the running daemon, else by connecting to each once
    (built-in servers forked from ``fork_server`` when there is one)."""
    from orchestrator.control import ask, ask_status
    from orchestrator.sockets import control_path

    path = control_path(config.state_path)
    try:
        status = await ask_status(path)
        answer = await ask(path, {"op": "channels"})
    except (OSError, TimeoutError):
        answer = None
    if answer is not None and "servers" in answer:
        servers: dict[str, dict[str, Any]] = answer["servers"]
        return _running_source(status), servers
    return Source(config, label), await _probe_each(config, fork_server)


def _running_source(status: dict[str, Any]) -> Source:
    """The daemon's own view: the config file it loaded and the bindings it runs."""
    label = str(status["config"])
    loaded = load_config(None if label == config_label(None) else label)
    bound = {str(agent["id"]): list(agent["channels"]) for agent in status["agents"]}
    return Source(loaded, label, pid=int(status["pid"]), bound=bound)


async def _probe_each(config: Any, fork_server: ForkServer | None) -> dict[str, dict[str, Any]]:
    """Every server started and described at once (each reports its own failure), in config order."""
    from orchestrator.child_env import child_env
    from orchestrator.cli.direct import serving
    from orchestrator.mesh import ServerConnection

    found: dict[str, dict[str, Any]] = {}

    async def describe(connection: ServerConnection) -> None:
        found[connection.name] = await connection.describe_once()

    env = child_env(config)
    async with serving(fork_server), anyio.create_task_group() as tg:
        for name, server in config.servers.items():
            connection = ServerConnection(
                name, server, config.supervision, base_env=env, keep_stderr=True, fork_server=fork_server
            )
            tg.start_soon(describe, connection)
    return {name: found[name] for name in config.servers}


async def _refused(config: Any) -> list[dict[str, Any]]:
    """What the running daemon's pairing gate refused since it started (nothing when it is down)."""
    from orchestrator.control import ask
    from orchestrator.sockets import control_path

    try:
        answer = await ask(control_path(config.state_path), {"op": "refused"})
    except (OSError, TimeoutError):
        return []
    rows: list[dict[str, Any]] = answer.get("refused", [])
    return rows


def _list(args: argparse.Namespace, source: Source, probe: dict[str, dict[str, Any]]) -> int:
    from orchestrator.claude_plugins import approvals_line
    from orchestrator.intake.gate import channel_servers

    config = source.config
    caps = {name: tuple(info.get("capabilities") or ()) for name, info in probe.items()}
    rows = []
    for name in channel_servers(config, caps):
        info = probe.get(name, {})
        rows.append(
            {
                "server": name,
                "connected": info.get("capabilities") is not None,
                "capabilities": [c for c in caps.get(name, ()) if "channel" in c or "events" in c],
                "agents": source.agents_on(name),
                "outbound_tool": config.channel(name).outbound_tool_name,
                "approvals": approvals_line(config, name, caps.get(name, ())),
                "error": info.get("error"),
            }
        )
    if args.json:
        print_json({"source": source.as_dict(), "channels": rows})
        return EXIT_OK
    if not rows:
        print("no channel servers in the config")
    for row in rows:
        state = ", ".join(row["capabilities"]) or (row["error"] or "no channel capability")
        agents = ", ".join(row["agents"]) or "no agent"
        print(
            f"{row['server']:<12} {state}; outbound {row['outbound_tool']}; bound to {agents}; "
            f"{row['approvals']}"
        )
    return EXIT_OK


def _doctor(
    args: argparse.Namespace,
    source: Source,
    probe: dict[str, dict[str, Any]],
    refused: list[dict[str, Any]],
) -> int:
    from orchestrator.claude_plugins import plugin_findings
    from orchestrator.intake.gate import channel_servers, evaluate
    from shared.settings import ConfigError

    config = source.config
    try:
        agents = [config.agent(args.binding)] if args.binding else list(config.agents)
    except ConfigError as exc:
        return fail(str(exc))
    if source.bound is not None:
        agents = [a.model_copy(update={"channels": source.bound.get(a.id, [])}) for a in agents]
    caps: dict[str, tuple[str, ...] | None] = {
        name: (tuple(info["capabilities"]) if info.get("capabilities") is not None else None)
        for name, info in probe.items()
    }
    results = [
        evaluate(
            config,
            agent,
            server,
            caps.get(server),
            probe.get(server, {}).get("server_name"),
            _start_error(probe.get(server, {})),
        )
        for agent in agents
        for server in channel_servers(config, caps)
    ]
    refused = [row for row in refused if row.get("agent") in {a.id for a in agents}]
    plugins = [
        f for name in channel_servers(config, caps) for f in plugin_findings(config, name, caps.get(name))
    ]
    if args.json:
        print_json(
            {
                "source": source.as_dict(),
                "results": [
                    {
                        "server": r.server,
                        "agent": r.agent,
                        "verdict": r.verdict,
                        "kind": r.kind,
                        "reason": r.reason,
                        "fix": r.fix,
                    }
                    for r in results
                ],
                "refused": refused,
                "plugins": [asdict(finding) for finding in plugins],
            }
        )
    else:
        for result in results:
            print(result.line())
        # A registered channel can still lose every event at the pairing gate: say so, with the fix.
        for line in refusal_lines(refused):
            print(line)
        for finding in plugins:
            print(finding.line())
        if not results:
            print("no channel servers in the config", file=sys.stderr)
    skipped = [r for r in results if r.verdict == "skip"]
    if any(finding.level == "error" for finding in plugins) or any(r.verdict == "fail" for r in results):
        return EXIT_FAIL
    warned = any(finding.level == "warning" for finding in plugins)
    return EXIT_WARN if skipped or refused or warned or not results else EXIT_OK


def _start_error(info: dict[str, Any]) -> str | None:
    """Why the server failed to start or connect (its own last line on stderr when it said one)."""
    return str(info["error"]) if info.get("failed") and info.get("error") else None


def _test(args: argparse.Namespace, config: Any) -> int:
    from shared.protocol.channel import normalize_inbound, render_channel, session_key
    from shared.settings import ConfigError

    if args.server not in config.servers:
        return fail(f"no server named {args.server!r}; use one of: {', '.join(sorted(config.servers))}")
    try:
        agent = config.agent(args.binding)
    except ConfigError as exc:
        return fail(str(exc))
    meta: dict[str, object] = {"chat_id": args.chat_id, "user_id": args.sender, "message_id": "test-1"}
    if args.thread_id:
        meta["thread_id"] = args.thread_id
    params = normalize_inbound(args.content, meta)
    key = session_key(args.server, params.meta, agent.session_scope)
    rendered = render_channel(args.server, params.content, params.meta)
    if args.json:
        print_json({"session_key": key, "scope": agent.session_scope, "rendered": rendered})
    else:
        print(f"session key ({agent.session_scope} scope for {agent.id}): {key}")
        print(rendered)
    return EXIT_OK if args.server in agent.channels else _unbound(args.server, agent.id)


def _unbound(server: str, agent: str) -> int:
    print(
        f"note: agent {agent!r} is not bound to {server!r}; its messages would not reach it", file=sys.stderr
    )
    return EXIT_WARN
