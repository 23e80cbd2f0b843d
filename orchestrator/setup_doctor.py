"""`nexo setup doctor`: whether pairing holds together: (channel, account) pairs, policy consistency,
pairing coverage and the operator's reachability. Pure functions of the config and of what the
servers report (``SetupFacts``, gathered by the CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.config.nexo import NexoConfig
from orchestrator.doctor import Finding, bound_channels, by_severity
from shared.protocol.identities import InvalidSender, normalize_sender


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
    bound = bound_channels(config)
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
    return by_severity(found)


def _channel_setup(
    config: NexoConfig, name: str, facts: SetupFacts, paired: list[PairedSender]
) -> list[Finding]:
    options = config.channel(name)
    pairing = options.pairing
    platform = pairing.platform_for(name)
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
