"""The doctors: what is armed (`nexo doctor capabilities`) and whether pairing holds together
(`nexo setup doctor`). Checks are pure functions of the config and of what the servers report, so
they are tested without processes; the CLI gathers the facts and prints the findings."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from orchestrator.config import NexoConfig
from orchestrator.intake.admission import platform_of
from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig
from shared.net import is_loopback
from shared.protocol.identities import InvalidSender, normalize_sender

Level = Literal["error", "warning", "info"]
EXIT_OK, EXIT_ERROR, EXIT_WARNING = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    check: str
    """A stable name of what was checked, e.g. ``dangerous_mode`` or ``pairing.allow_from``."""
    subject: str
    """What it is about: an agent, a channel, ``channel:account``, a server."""
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f" -> {self.fix}" if self.fix else ""
        return f"{self.level.upper():7} {self.check:24} {self.subject}: {self.detail}{fix}"


def exit_code(findings: Iterable[Finding]) -> int:
    """1 on any error, 2 on warnings only, 0 otherwise (info lines are not problems)."""
    levels = {finding.level for finding in findings}
    if "error" in levels:
        return EXIT_ERROR
    return EXIT_WARNING if "warning" in levels else EXIT_OK


def as_json(findings: Sequence[Finding]) -> dict[str, Any]:
    return {
        "findings": [asdict(finding) for finding in findings],
        "errors": sum(f.level == "error" for f in findings),
        "warnings": sum(f.level == "warning" for f in findings),
    }


# -- nexo doctor capabilities -----------------------------------------------------------------


def capabilities(config: NexoConfig) -> list[Finding]:
    """Every armed risky knob, loudest first."""
    found: list[Finding] = []
    for index in range(len(config.agents)):
        found.extend(_agent_knobs(config, index))
    for name in _bound_channels(config):
        pairing = config.channel(name).pairing
        if pairing.policy == "open":
            found.append(
                Finding(
                    "warning",
                    "pairing.open",
                    name,
                    "direct messages from anyone reach the model (policy: open)",
                    f"set channel_options.{name}.pairing.policy to pairing or allowlist",
                )
            )
        if pairing.group_policy == "open":
            found.append(
                Finding(
                    "warning",
                    "pairing.group_open",
                    name,
                    "every group the bot is added to reaches the model (group_policy: open)",
                    f"set channel_options.{name}.pairing.group_policy to allowlist",
                )
            )
        if pairing.group_policy != "disabled" and not pairing.require_mention:
            found.append(
                Finding(
                    "warning",
                    "pairing.require_mention",
                    name,
                    "every message in an allowed group reaches the model, mentioned or not",
                    f"set channel_options.{name}.pairing.require_mention: true",
                )
            )
    found.extend(_transport_knobs(config))
    if config.servers.get(config.pairing.server) is None and _bound_channels(config):
        found.append(
            Finding(
                "info",
                "pairing.server",
                config.pairing.server,
                "no pairing server: only each channel's pairing.allow_from senders reach the model",
                f"add servers.{config.pairing.server} (args: [-m, servers.pairing]) to let contacts pair "
                "with codes",
            )
        )
    return _sorted(found)


def _agent_knobs(config: NexoConfig, index: int) -> list[Finding]:
    agent = config.agents[index]
    found: list[Finding] = []
    # The subject names the agent (and binding); ``key`` is the config path of the policy itself:
    # a binding is a policy of its own, so its keys sit right under bindings.<channel>.
    policies = [(f"agents.{agent.id}", f"agents[{index}].permissions", agent.permissions)] + [
        (f"agents.{agent.id}.bindings.{channel}", f"agents[{index}].bindings.{channel}", binding)
        for channel, binding in agent.bindings.items()
    ]
    for where, key, policy in policies:
        if policy.dangerous_mode:
            found.append(
                Finding(
                    "warning",
                    "dangerous_mode",
                    where,
                    "every tool call runs without asking (dangerous_mode: true)",
                    f"remove {key}.dangerous_mode or set it to false",
                )
            )
        if policy.auto_approve:
            found.append(
                Finding(
                    "info",
                    "auto_approve",
                    where,
                    "read-only tools, read-only shell commands and writes inside the workspace run unasked",
                    f"set {key}.auto_approve: false to be asked for every side effect",
                )
            )
        unasked = [label for label in ("outbound", "dangerous") if policy.tiers.of(label) == "safe"]
        if unasked:
            found.append(
                Finding(
                    "warning",
                    "tiers",
                    where,
                    "outbound or dangerous tools run without asking (tier safe)",
                    f"set {' and '.join(f'{key}.tiers.{label}' for label in unasked)} to notify or confirm",
                )
            )
    if config.autonomy.enabled and (agent.heartbeat.enabled or agent.proactive.enabled):
        budgets = config.autonomy.budgets
        if budgets.per_day.tokens is None and budgets.per_day.usd is None:
            found.append(
                Finding(
                    "warning",
                    "autonomy.budget",
                    f"agents.{agent.id}",
                    "heartbeat or proactive mode is on with no daily token or money budget",
                    "set autonomy.budgets.per_day.tokens or .usd",
                )
            )
    return found


def _transport_knobs(config: NexoConfig) -> list[Finding]:
    found: list[Finding] = []
    for name, server in sorted(config.servers.items()):
        if isinstance(server, HttpServerConfig):
            parts = urlsplit(server.url)
            if parts.scheme == "http" and not _local_network(parts.hostname or ""):
                found.append(
                    Finding(
                        "warning",
                        "http_without_tls",
                        name,
                        f"{server.url} carries the bearer token in clear text over the network",
                        "use https:// (a TLS-terminating proxy), or a loopback or private-network address",
                    )
                )
        elif isinstance(server, StdioServerConfig):
            for key, value in sorted(server.env.items()):
                if key.endswith(("_BIND", "_HOST")) and value and not _loopback_bind(value):
                    found.append(
                        Finding(
                            "warning",
                            "non_loopback_bind",
                            name,
                            f"{key}={value} listens beyond this machine",
                            "bind 127.0.0.1 and put a TLS proxy in front, or keep the bearer token secret",
                        )
                    )
                if key == "NEXO_WORKSPACE_SANDBOX" and value == "none":
                    found.append(
                        Finding(
                            "warning",
                            "sandbox_off",
                            name,
                            "shell commands run without the bubblewrap sandbox",
                            "remove NEXO_WORKSPACE_SANDBOX or set it to bwrap",
                        )
                    )
    return found


def _local_network(host: str) -> bool:
    """Loopback, a private IP literal, or a single-label name (a compose service, a LAN host)."""
    if is_loopback(host):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_private
    except ValueError:
        return bool(host) and "." not in host


def _loopback_bind(value: str) -> bool:
    """Whether ``HOST``, ``HOST:PORT``, ``[V6]`` or ``[V6]:PORT`` (or a bare IPv6 literal) is loopback."""
    if value.startswith("["):
        host = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        host = value.partition(":")[0]
    else:
        host = value
    return is_loopback(host)


# -- nexo setup doctor ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PairedSender:
    channel: str
    account: str
    scope: str
    sender: str
    role: str


@dataclass
class SetupFacts:
    """What the servers report, gathered by the CLI (None: that server could not be asked)."""

    paired: list[PairedSender] | None = None
    pending: int = 0
    outbound_tools: dict[str, set[str]] = field(default_factory=dict)
    """Channel server -> its tool names (for the servers that answered)."""
    relay_capable: set[str] = field(default_factory=set)
    capabilities: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Channel server -> the capabilities it declared (for the servers that answered)."""
    unreachable: dict[str, str] = field(default_factory=dict)
    shell_unavailable: dict[str, str] = field(default_factory=dict)
    """Workspace server -> why it offers no shell (its own ``workspace_info`` warning)."""
    through: str | None = None
    """The running daemon the channel servers were asked through, when one holds them."""


def setup(config: NexoConfig, facts: SetupFacts) -> list[Finding]:
    """(channel, account) pairs, policy consistency and pairing coverage."""
    found: list[Finding] = []
    bound = _bound_channels(config)
    for name in sorted(config.channel_options):
        if name not in config.servers:
            found.append(
                Finding(
                    "error",
                    "channel_options",
                    name,
                    "options for a server the config does not define",
                    f"add servers.{name} or remove channel_options.{name}",
                )
            )
    if facts.through is not None:
        found.append(
            Finding("info", "live", "channels", f"asked through {facts.through}, which holds the servers")
        )
    for name, error in sorted(facts.unreachable.items()):
        found.append(
            Finding(
                "error",
                "reachable",
                name,
                f"could not be reached: {error}",
                f"correct servers.{name} as the message says, then run `nexo setup doctor` again "
                "(`nexo status` shows a running nexo's view)",
            )
        )
    server = config.pairing.server
    if server in config.servers and facts.paired is None and server not in facts.unreachable:
        found.append(
            Finding(
                "error",
                "pairing.list",
                server,
                "the pairing server did not list its pairings, so coverage could not be checked",
                "run `nexo pair list` to see its error",
            )
        )
    paired = facts.paired or []
    for name in sorted(bound):
        found.extend(_channel_setup(config, name, facts, paired))
    found.extend(_operator_setup(config, facts, bound))
    if facts.paired is not None:
        for record in paired:
            if record.channel not in bound:
                found.append(
                    Finding(
                        "warning",
                        "pairing.stale",
                        f"{record.channel}:{record.account}",
                        f"{record.sender} is paired on a channel no agent is bound to",
                        f"`nexo pair revoke {record.channel}:{record.sender} --account {record.account}"
                        f"{' --scope group' if record.scope == 'group' else ''}` if it is no longer wanted",
                    )
                )
    for name, why in sorted(facts.shell_unavailable.items()):
        found.append(
            Finding(
                "warning",
                "sandbox",
                name,
                f"the agent has no shell: {why}",
                "install bubblewrap with `sudo apt-get install bubblewrap` and restart nexo",
            )
        )
    if facts.pending:
        found.append(
            Finding(
                "info",
                "pairing.pending",
                config.pairing.server,
                f"{facts.pending} pairing request(s) wait for the operator",
                "`nexo pair list` shows them; `nexo pair approve CODE` admits one",
            )
        )
    return _sorted(found)


def _channel_setup(
    config: NexoConfig, name: str, facts: SetupFacts, paired: list[PairedSender]
) -> list[Finding]:
    options = config.channel(name)
    pairing = options.pairing
    platform = platform_of(name, pairing)
    subject = f"{name}:{pairing.account}"
    found: list[Finding] = []
    for sender in pairing.allow_from:
        try:
            normalize_sender(platform, sender)
        except InvalidSender as exc:
            found.append(
                Finding(
                    "error", "pairing.allow_from", subject, str(exc), f"fix channel_options.{name}.pairing"
                )
            )
    here = [r for r in paired if r.channel == name and r.account == pairing.account]
    dm = [r for r in here if r.scope == "dm"]
    groups = [r for r in here if r.scope == "group"]
    has_server = config.pairing.server in config.servers
    # Without a pairing server nobody can be paired; with one that did not answer, nothing is known.
    known = facts.paired is not None or not has_server
    if known and pairing.policy in ("pairing", "allowlist") and not pairing.allow_from and not dm:
        found.append(
            Finding(
                "warning",
                "pairing.coverage",
                subject,
                f"nobody is paired and allow_from is empty: no direct message reaches the model "
                f"(policy: {pairing.policy})",
                f"add your own id to channel_options.{name}.pairing.allow_from or "
                f"`nexo pair seed {name} {pairing.account} ID`",
            )
        )
    if pairing.policy == "pairing" and not has_server:
        found.append(
            Finding(
                "error",
                "pairing.server",
                subject,
                "policy pairing needs the pairing server to issue codes, and the config has none",
                f"add servers.{config.pairing.server} or use policy allowlist",
            )
        )
    tools = facts.outbound_tools.get(name)
    if pairing.policy == "pairing" and tools is not None and options.outbound_tool_name not in tools:
        found.append(
            Finding(
                "error",
                "pairing.reply",
                subject,
                f"codes cannot be sent: the server has no {options.outbound_tool_name!r} tool",
                f"set channel_options.{name}.outbound_tool_name to one of: {', '.join(sorted(tools))}",
            )
        )
    if known and pairing.group_policy == "allowlist" and not groups:
        found.append(
            Finding(
                "warning",
                "pairing.groups",
                subject,
                "group_policy allowlist but no group is seeded: no group message reaches the model",
                f"`nexo pair seed {name} {pairing.account} GROUP_ID --scope group`",
            )
        )
    if options.approvers is not None:
        owners = {r.sender for r in dm if r.role == "owner"} | set(pairing.allow_from)
        for approver in options.approvers:
            if approver not in owners:
                found.append(
                    Finding(
                        "warning",
                        "approvers",
                        subject,
                        f"approver {approver} is neither in allow_from nor paired as owner",
                        f"pair them as owner (`nexo pair seed {name} {pairing.account} {approver} --owner`)",
                    )
                )
    if pairing.policy == "open" and pairing.allow_from:
        found.append(
            Finding(
                "info",
                "pairing.open",
                subject,
                "allow_from marks the owner; everybody else still reaches the model as a contact",
            )
        )
    return found


def _operator_setup(config: NexoConfig, facts: SetupFacts, bound: set[str]) -> list[Finding]:
    operator = config.operator
    found: list[Finding] = []
    if operator.channel not in config.servers:
        found.append(
            Finding(
                "error",
                "operator.channel",
                operator.channel,
                "the operator's channel is not a server in the config: notices and approvals go nowhere",
                "set operator.channel to a channel server's name",
            )
        )
    elif operator.channel not in bound:
        found.append(
            Finding(
                "warning",
                "operator.channel",
                operator.channel,
                "the operator's channel is not bound to any agent: answers from it are not read",
                "add it to an agent's channels",
            )
        )
    elif (
        facts.outbound_tools.get(operator.channel) is not None and operator.channel not in facts.relay_capable
    ):
        found.append(
            Finding(
                "info",
                "operator.relay",
                operator.channel,
                "the operator's channel does not relay approvals: pairing requests are approved "
                "with `nexo pair approve CODE` only",
            )
        )
    return found


def _bound_channels(config: NexoConfig) -> set[str]:
    return {name for agent in config.agents for name in agent.channels}


_ORDER = {"error": 0, "warning": 1, "info": 2}


def _sorted(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: (_ORDER[f.level], f.check, f.subject))
