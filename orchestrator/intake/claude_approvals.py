"""Approvals relayed to Claude Code channels, and the verdicts they send back.

A Claude Code channel's verdict names nobody, so it counts only where the operator said the server's
approvers are the operator (``channel_options.<server>.claude_permission_relay: true``), and only for
as long as nothing contradicts that: once the server lets through a message from anyone nexo does not
know as an owner (a paired contact, a group member, a stranger), whoever it lets answer is not only
the operator, and nexo stops relaying to it until restarted. Every verdict is logged and recorded in
the ledger; one that is not counted says why.
"""

from __future__ import annotations

import logging

from orchestrator.config.nexo import NexoConfig
from orchestrator.intake.notices import Notices
from orchestrator.mesh import Mesh, ServerConnection
from orchestrator.permissions import ApprovalBroker
from orchestrator.permissions.claude_relay import NEXO_PERMISSION, ClaudeRelay, speaks_claude_relay_only
from shared.protocol.channel import PermissionVerdictParams

logger = logging.getLogger("nexo.approvals")


def relay_setting(server: str) -> str:
    return f"channel_options.{server}.claude_permission_relay"


class ClaudeApprovals:
    """The Claude Code channels one agent relays approvals to, and their verdicts."""

    def __init__(
        self,
        config: NexoConfig,
        mesh: Mesh,
        channels: list[str],
        broker: ApprovalBroker,
        notices: Notices,
    ) -> None:
        self._config = config
        self._mesh = mesh
        self._channels = channels
        self._broker = broker
        self._notices = notices
        self.withdrawn: dict[str, str] = {}
        """Servers whose relay was stopped in this process, and why."""

    def turned_on(self, server: str) -> bool:
        return server in self._channels and self._config.channel(server).claude_permission_relay

    def relays(self) -> list[ClaudeRelay]:
        return [
            ClaudeRelay(self._mesh[name])
            for name in self._channels
            if self.turned_on(name)
            and name not in self.withdrawn
            and speaks_claude_relay_only(self._mesh[name])
        ]

    def unreached(self) -> str:
        """The Claude Code channels that could show approval prompts but are not asked, and why."""
        reasons = []
        for name in self._channels:
            connection = self._mesh.get(name)
            if connection is None or not speaks_claude_relay_only(connection):
                continue
            if not self.turned_on(name):
                reasons.append(f"{name} is a Claude Code channel and {relay_setting(name)} is off")
            elif name in self.withdrawn:
                reasons.append(f"the relay to {name} was stopped ({self.withdrawn[name][:200]})")
        if not reasons:
            return ""
        return "; ".join(reasons) + " (see `nexo channel doctor`)"

    def saw_sender(
        self, connection: ServerConnection, sender: str | None, *, owner: bool, group: bool
    ) -> None:
        """A message came through ``connection``: one from anyone but an owner in a DM ends its relay."""
        server = connection.name
        if (owner and not group) or not self.turned_on(server) or server in self.withdrawn:
            return
        if not speaks_claude_relay_only(connection):
            return
        who = f"sender {sender[:80]!r}" if sender else "a sender with no id"
        if group:
            what = f"a group chat message (from {who}), so everyone in that group can write to it"
        else:
            what = f"a message from {who}, who is not an owner here"
        reason = (
            f"{server} let through {what}; its approval answers name nobody, so they could come from "
            "someone other than the operator"
        )
        self.withdrawn[server] = reason
        message = (
            f"approval relay to {server} stopped: {reason}. Approvals go to the other approving "
            f"channels. Fix: let only the operator through that server (its own allowlist), or turn "
            f"{relay_setting(server)} off; then restart `nexo run`. `nexo channel doctor` explains."
        )
        logger.warning(message, extra={"server": server})
        self._notices.record(
            "warning", message, source=f"channel:{server}", subject=f"relay stopped {server}"
        )

    async def verdict(self, server: str, verdict: PermissionVerdictParams) -> None:
        """A ``notifications/claude/channel/permission`` from ``server``: counted or refused, recorded."""
        request_id, behavior = verdict.request_id, verdict.behavior
        connection = self._mesh.get(server)
        if connection is not None and connection.has_capability(NEXO_PERMISSION):
            # A nexo channel pushes its verdicts in both namespaces as a hint; the event it keeps,
            # which names who answered, is the answer (pulled and recorded by the intake).
            logger.debug("pushed verdict %s from nexo channel %s left to its event", request_id, server)
            return
        logger.info(
            "approval answer %s (%s) from %s in Claude Code's contract",
            request_id,
            behavior,
            server,
            extra={"server": server},
        )
        why: str | None = None
        if not self.turned_on(server):
            why = (
                f"{relay_setting(server)} is off, so answers from {server} (which name nobody) do not "
                f"count; set it to true only if everyone {server} lets answer is the operator"
            )
        elif server in self.withdrawn:
            why = f"the relay to {server} was stopped: {self.withdrawn[server]}"
        elif not speaks_claude_relay_only(self._mesh[server]):
            why = f"{server} does not declare claude/channel/permission alone; its nexo answers count"
        elif not self._broker.resolve(request_id, behavior, f"channel:{server}"):
            # First answer wins: a later one is recorded and logged, and needs no notice of its own.
            self._refused(
                server,
                request_id,
                behavior,
                "no such request is waiting on this channel (already answered, expired, or not asked here)",
            )
            return
        if why is None:
            return
        self._refused(server, request_id, behavior, why)
        await self._notices.tell_operator(
            f"[refused] approval answer {request_id} ({behavior}) from {server}: {why}. "
            "See `nexo channel doctor`.",
            key=f"refused-claude:{server}:{request_id}",
        )

    def _refused(self, server: str, request_id: str, behavior: str, why: str) -> None:
        message = f"approval answer {request_id} ({behavior}) from {server} refused: {why}"
        logger.warning(message, extra={"server": server})
        self._notices.record(
            "warning", message, source=f"channel:{server}", subject=f"refused answer {request_id}"
        )
