"""The channel gate: five checks, first failure wins, before a channel's messages reach an agent.

1. the server declares a channel capability (``nexo/channel`` or ``claude/channel``);
2. ``channels.enabled`` (the kill switch, off by default);
3. the agent's binding lists the server (``agents[].channels``);
4. if the approval pins a ``plugin_source``, the server reports exactly that name;
5. the server is in ``channels.approved``.

A skipped server stays connected (its tools still work); only its inbound messages are not taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from orchestrator.config.agents import AgentConfig
from orchestrator.config.nexo import NexoConfig

CHANNEL_CAPABILITIES = ("nexo/channel", "claude/channel")
Verdict = Literal["register", "skip", "not_bound", "fail"]


@dataclass(frozen=True, slots=True)
class GateResult:
    server: str
    agent: str
    verdict: Verdict
    kind: str = ""
    """For a skip: capability, disabled, binding, plugin_source or not_approved; for a fail: start."""
    reason: str = ""
    fix: str = ""

    def line(self) -> str:
        if self.verdict == "register":
            return f"{self.server:<12} WOULD REGISTER for {self.agent}"
        label = {"not_bound": "NOT BOUND", "fail": f"FAIL {self.kind}"}.get(self.verdict, f"SKIP {self.kind}")
        return f"{self.server:<12} {label} for {self.agent}: {self.reason}. Fix: {self.fix}"


def evaluate(
    config: NexoConfig,
    agent: AgentConfig,
    server: str,
    capabilities: tuple[str, ...] | None,
    reported_name: str | None,
    start_error: str | None = None,
) -> GateResult:
    """``capabilities``/``reported_name`` come from the live connection (None: not connected yet);
    ``start_error`` is why the server failed to start, when it did (the doctor's probe)."""

    def skip(kind: str, reason: str, fix: str) -> GateResult:
        return GateResult(server, agent.id, "skip", kind, reason, fix)

    if capabilities is None and start_error is not None:
        return GateResult(
            server,
            agent.id,
            "fail",
            "start",
            f"the server failed to start or connect: {start_error.rstrip('.')}",
            f"correct servers.{server} (its env or command) as the message says, then run "
            "`nexo channel doctor` again",
        )
    if capabilities is None:
        return skip(
            "capability",
            "the server is not connected, so its capabilities are unknown",
            "check `nexo status`",
        )
    if not any(cap in capabilities for cap in CHANNEL_CAPABILITIES):
        return skip(
            "capability",
            "it declares neither nexo/channel nor claude/channel",
            "point the binding at a channel server, or remove it from agents[].channels; for a Claude Code "
            f"channel server set servers.{server}.protocol: legacy (it declares its capability the "
            "handshake-era way)",
        )
    if not config.channels.enabled:
        return skip("disabled", "channels.enabled is false (the kill switch)", "set channels.enabled: true")
    if server not in agent.channels:
        return GateResult(
            server,
            agent.id,
            "not_bound",
            "binding",
            "no binding lists it",
            f"add it to the channels of agent {agent.id!r}",
        )
    approval = config.channels.approval(server)
    if (
        approval is not None
        and approval.plugin_source is not None
        and approval.plugin_source != reported_name
    ):
        return skip(
            "plugin_source",
            f"the approval pins plugin_source {approval.plugin_source!r} "
            f"but the server reports {reported_name!r}",
            "check what the server's command runs, then correct the pin",
        )
    if approval is None:
        return skip(
            "not_approved",
            "it is not in channels.approved",
            f"add `- server: {server}` under channels.approved once you trust it",
        )
    return GateResult(server, agent.id, "register")


def channel_servers(config: NexoConfig, capabilities: Mapping[str, tuple[str, ...] | None]) -> list[str]:
    """Servers that are channels, or are bound as one, in config order."""
    bound = {name for agent in config.agents for name in agent.channels}
    return [
        name
        for name in config.servers
        if name in bound or any(cap in (capabilities.get(name) or ()) for cap in CHANNEL_CAPABILITIES)
    ]
