"""The permission gate the loop calls before every tool: the policy decides, the broker asks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from orchestrator.loop.tools import Decision
from orchestrator.mesh import Catalog, CatalogTool
from orchestrator.permissions.claude_relay import Relay
from orchestrator.permissions.policy import PolicyEngine, Standing
from shared.protocol.channel import input_preview

logger = logging.getLogger("nexo.permissions")

Notify = Callable[[str], Awaitable[None]]
"""Tells the operator, in one line, that a ``notify``-tier tool is running."""


class Approver(Protocol):
    """Asks the operator about one call (the :class:`ApprovalBroker`)."""

    async def ask(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        call_id: str,
        relays: Sequence[Relay],
        *,
        origin: str = "",
    ) -> Decision: ...


class PolicyGate:
    """Runs each call through a :class:`PolicyEngine`; "ask" goes to the operator through the broker.

    Without an engine the default policy applies: read-only tools run, everything else asks.
    """

    def __init__(
        self,
        broker: Approver,
        relays: Callable[[], Sequence[Relay]],
        policy: PolicyEngine | None = None,
        *,
        notify: Notify | None = None,
        unattended: bool = False,
        approval_live: bool = False,
        private_data: bool | None = None,
        origin: str = "",
    ) -> None:
        self._broker = broker
        self._relays = relays
        self.engine = policy or PolicyEngine()
        self._notify = notify
        self.unattended = unattended
        self.approval_live = approval_live
        # Without a principal the turn is the operator's own (`nexo agent run`, cron, heartbeat).
        self.private_data = self.engine.grants_private_data("owner") if private_data is None else private_data
        self.origin = origin
        """The chat and sender the goal serves, named in every prompt it raises (see ``origin_line``)."""

    def _derived(self, **changes: Any) -> PolicyGate:
        """The same policy, broker, relays and rate limits, with ``changes`` to the turn's own facts."""
        facts: dict[str, Any] = {
            "unattended": self.unattended,
            "approval_live": self.approval_live,
            "private_data": self.private_data,
            "origin": self.origin,
        }
        return PolicyGate(
            self._broker, self._relays, self.engine, notify=self._notify, **{**facts, **changes}
        )

    def for_turn(self, unattended: bool, *, approval_live: bool = False) -> PolicyGate:
        """The same gate for a turn with (or without) a human in the loop."""
        return self._derived(unattended=unattended, approval_live=approval_live)

    def for_principal(self, role: Standing) -> PolicyGate:
        """The same gate for a conversation with a sender of ``role`` (pairing's verdict)."""
        return self._derived(private_data=self.engine.grants_private_data(role))

    def for_origin(self, origin: str) -> PolicyGate:
        """The same gate for a goal serving ``origin``."""
        return self._derived(origin=origin)

    def visible(self, catalog: Catalog) -> Catalog:
        """The tools this gate's principal may be offered: private-data readers only with the capability."""
        if self.private_data:
            return catalog
        return catalog.only(lambda tool: not self.engine.reads_private_data(tool))

    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision:
        decision = self.engine.decide(
            tool,
            arguments,
            unattended=self.unattended,
            approval_live=self.approval_live,
            private_data=self.private_data,
        )
        logger.info(
            "%s %s (%s, tier %s): %s",
            decision.action,
            tool.qualified,
            decision.classification,
            decision.tier,
            decision.reason,
        )
        if decision.action == "run":
            return Decision(True, decision.reason)
        if decision.action == "notify":
            await self._tell(f"nexo is running {tool.qualified} {input_preview(arguments)}")
            return Decision(True, decision.reason)
        if decision.action == "ask":
            return await self._broker.ask(tool, arguments, call_id, self._relays(), origin=self.origin)
        return Decision(False, decision.reason)

    async def _tell(self, line: str) -> None:
        if self._notify is None:
            return
        try:
            await self._notify(" ".join(line.split()))
        except Exception as exc:  # noqa: BLE001 -- a lost notice must not stop the tool it announces
            logger.warning("could not tell the operator %r: %s", line[:120], exc)


OperatorGate = PolicyGate
"""The earlier name, kept for existing imports."""
