"""The permission gate the loop calls before every tool: the policy decides, the broker asks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from orchestrator.loop.tools import Decision
from orchestrator.mesh import CatalogTool, ServerConnection
from orchestrator.permissions.policy import PolicyEngine
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
        relays: Sequence[ServerConnection],
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
        relays: Callable[[], Sequence[ServerConnection]],
        policy: PolicyEngine | None = None,
        *,
        notify: Notify | None = None,
        unattended: bool = False,
        approval_live: bool = False,
        origin: str = "",
    ) -> None:
        self._broker = broker
        self._relays = relays
        self.engine = policy or PolicyEngine()
        self._notify = notify
        self.unattended = unattended
        self.approval_live = approval_live
        self.origin = origin
        """The chat and sender the goal serves, named in every prompt it raises (see ``origin_line``)."""

    def for_origin(self, origin: str) -> PolicyGate:
        """The same gate for a goal serving ``origin``."""
        return PolicyGate(
            self._broker,
            self._relays,
            self.engine,
            notify=self._notify,
            unattended=self.unattended,
            approval_live=self.approval_live,
            origin=origin,
        )

    def for_turn(self, unattended: bool, *, approval_live: bool = False) -> PolicyGate:
        """The same policy, broker and rate limits for a turn with (or without) a human in the loop."""
        return PolicyGate(
            self._broker,
            self._relays,
            self.engine,
            notify=self._notify,
            unattended=unattended,
            approval_live=approval_live,
            origin=self.origin,
        )

    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision:
        decision = self.engine.decide(
            tool, arguments, unattended=self.unattended, approval_live=self.approval_live
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
