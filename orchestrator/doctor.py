"""The doctors' findings, and what is armed (`nexo doctor capabilities`). Checks are pure functions
of the config and of what the servers report, so they are tested without processes; the CLI gathers
the facts and prints the findings. `nexo setup doctor` is in orchestrator/setup_doctor.py."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from orchestrator.config.nexo import NexoConfig
from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig
from shared.net import is_loopback

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
    for name in bound_channels(config):
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
    if config.servers.get(config.pairing.server) is None and bound_channels(config):
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
    return by_severity(found)


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


def bound_channels(config: NexoConfig) -> set[str]:
    return {name for agent in config.agents for name in agent.channels}


_ORDER = {"error": 0, "warning": 1, "info": 2}


def by_severity(found: list[Finding]) -> list[Finding]:
    return sorted(found, key=lambda f: (_ORDER[f.level], f.check, f.subject))
