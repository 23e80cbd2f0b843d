"""Pending approvals: relayed to every approving channel, first answer wins, timeout means deny.

Pending approvals live in this process only: a restart drops them, which is a deny.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from orchestrator.goals.sink import AuditSink
from orchestrator.loop.tools import Decision
from orchestrator.mesh import CatalogTool, ServerConnection
from orchestrator.permissions.claude_relay import ClaudeRelay, Relay
from orchestrator.permissions.preview import approval_preview
from shared.protocol.audit.bodies import ApprovalAnsweredBody, ApprovalRequestedBody
from shared.protocol.audit.digest import args_digest
from shared.protocol.audit.entries import EntryDraft
from shared.protocol.channel import request_id_for
from shared.protocol.permission_prompts import (
    PermissionClosedCall,
    PermissionClosedParams,
    PermissionClosedResult,
    PermissionPrompt,
    PermissionRequestAccepted,
    PermissionRequestCall,
    PromptOutcome,
)

logger = logging.getLogger("nexo.approvals")
RELAY_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0
SETTLED_KEPT = 200
"""How many settled request ids are remembered, to tell a late answer how its request ended."""


def call_hash(tool: str, arguments: Mapping[str, Any]) -> str:
    """Binds an approval to exactly this call: a changed argument is a different call."""
    body = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass
class _Pending:
    request_id: str
    call_hash: str
    tool: str
    done: anyio.Event = field(default_factory=anyio.Event)
    behavior: Literal["allow", "deny"] = "deny"
    answered_by: str = ""
    asked_at: float = field(default_factory=time.monotonic)
    asked: set[str] = field(default_factory=set)
    """The channel sources (``channel:<server>``) the prompt went to: only they may answer."""
    decided_by: str = ""
    """Who answered, for the channels to show (``telegram:12345 (Ana)``)."""
    outcome: PromptOutcome = "cancelled"
    """How it ended, told to the channels that showed it; a goal cancelled mid-wait stays cancelled."""
    description: str = ""
    preview: str = ""
    origin: str = ""
    asked_at_wall: float = field(default_factory=time.time)
    approver: str = ""
    """The person who answered on an operator surface (the dashboard's logged-in operator)."""
    call_id: str = ""
    withdrawn: bool = False
    """Settled by acting on what it asked elsewhere (a pairing approved with `nexo pair approve` or on
    the dashboard): nothing is left for the asker to do."""


OPERATOR_SURFACES = frozenset({"dashboard"})
"""Sources that may answer any pending prompt: operator surfaces reached only through the control
socket, whose requests come from the operator (the dashboard checks its login before forwarding)."""


DECIDED_BY_MAX = 120


def decider(server: str, sender: object = None, name: object = None) -> str:
    """Who answered a prompt, for display: ``telegram:12345 (Ana)``, or the channel alone."""
    label = f"{server}:{sender}" if sender not in (None, "") else server
    if name not in (None, ""):
        label = f"{label} ({name})"
    printable = "".join(char if char.isprintable() else " " for char in label)
    return printable[:DECIDED_BY_MAX]


def _description(tool: CatalogTool, origin: str) -> str:
    what = (tool.description or tool.qualified)[:300]
    return f"for {origin[:300]}: {what}" if origin else what


class ApprovalBroker:
    def __init__(self, timeout_s: float = 600.0, *, sink: AuditSink | None = None, agent: str = "") -> None:
        self._timeout = timeout_s
        self._pending: dict[str, _Pending] = {}
        self._sink = sink
        self._agent = agent
        self._nonce = secrets.token_hex(8)
        self._used: set[str] = set()
        self._settled: dict[str, str] = {}
        self.unreached: Callable[[], str] = lambda: ""
        """Why a channel that could show prompts is not asked (said when nobody could be asked)."""

    def _record(self, body: ApprovalRequestedBody | ApprovalAnsweredBody) -> None:
        if self._sink is not None:
            self._sink.record(
                EntryDraft.of(body, source="orchestrator", agent=self._agent, subject=body.request_id)
            )

    def _new_id(self, call_id: str) -> str:
        # Salted per process: a model's call ids repeat after a restart, request ids must not, so an
        # answer typed for a prompt of the previous process can never approve a new one.
        request_id = request_id_for(f"{self._nonce}:{call_id}")
        salt = 0
        while request_id in self._pending or request_id in self._used:
            salt += 1
            request_id = request_id_for(f"{self._nonce}:{call_id}#{salt}")
        self._used.add(request_id)
        return request_id

    async def ask(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        call_id: str,
        relays: Sequence[Relay],
        *,
        origin: str = "",
    ) -> Decision:
        """Relay the prompt and wait for the first answer; ``origin`` names the chat and sender the
        goal serves (the prompt says it first, so the operator knows whose request it is)."""
        pending = _Pending(self._new_id(call_id), call_hash(tool.qualified, arguments), tool.qualified)
        params = PermissionPrompt(
            request_id=pending.request_id,
            tool_name=tool.qualified,
            description=_description(tool, origin),
            input_preview=approval_preview(arguments),
        )
        pending.description, pending.preview = params.description, params.input_preview
        pending.origin, pending.call_id = origin, call_id
        self._pending[pending.request_id] = pending
        try:
            delivered = 0
            for relay in relays:
                # Marked before the request: a quick answer may arrive before the request returns.
                pending.asked.add(f"channel:{relay.name}")
                try:
                    if isinstance(relay, ClaudeRelay):
                        with anyio.fail_after(RELAY_TIMEOUT_S):
                            delivered += await relay.show(params)
                    else:
                        accepted = await relay.request(
                            PermissionRequestCall(params=params),
                            PermissionRequestAccepted,
                            timeout=RELAY_TIMEOUT_S,
                        )
                        delivered += accepted.delivered
                except Exception as exc:  # noqa: BLE001 -- one unreachable relay must not block the others
                    logger.warning("approval %s not relayed to %s: %s", pending.request_id, relay.name, exc)
                    pending.asked.discard(f"channel:{relay.name}")
            self._record(
                ApprovalRequestedBody(
                    request_id=pending.request_id,
                    tool=tool.qualified[:200],
                    args_sha256=args_digest(arguments),
                    description=params.description,
                    asked=[f"channel:{relay.name}" for relay in relays][:50],
                )
            )
            if delivered == 0:  # withdrawn: nobody saw it, so nobody decided
                self._answered(pending, "deny", "unavailable")
                why = self.unreached()
                return Decision(
                    False,
                    f"{tool.qualified} needs approval and no operator is connected (open `nexo chat`)"
                    + (f"; {why}" if why else ""),
                )
            logger.info(
                "approval %s for %s (%s) asked on %d screens",
                pending.request_id,
                tool.qualified,
                pending.call_hash[:12],
                delivered,
            )
            with anyio.move_on_after(self._timeout):
                await pending.done.wait()
            if not pending.done.is_set():
                pending.outcome = "expired"
                self._answered(pending, "deny", "timeout")
                return Decision(False, f"no answer within {self._timeout:g}s: treated as deny")
            pending.outcome = "allowed" if pending.behavior == "allow" else "denied"
            self._answered(pending, pending.behavior, pending.answered_by)
            if pending.withdrawn:
                return Decision(
                    False, f"already {pending.outcome} by {pending.decided_by}: nothing left to do"
                )
            if pending.behavior == "allow":
                return Decision(True, f"approved by {pending.answered_by}")
            return Decision(False, f"the operator denied {tool.qualified} (request {pending.request_id})")
        finally:
            self._pending.pop(pending.request_id, None)
            shown = [
                r for r in relays if not isinstance(r, ClaudeRelay) and f"channel:{r.name}" in pending.asked
            ]
            await self._close(pending, shown)

    async def _close(self, pending: _Pending, relays: Sequence[ServerConnection]) -> None:
        """Tell the channels that showed the prompt it is settled, so a chat opened later is not shown
        it, how it ended and by whom; a channel without the request (or unreachable) just keeps it
        until it expires."""
        request_id = pending.request_id
        closed = PermissionClosedParams(
            request_id=request_id, outcome=pending.outcome, decided_by=pending.decided_by or None
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            for relay in relays:
                try:
                    await relay.request(
                        PermissionClosedCall(params=closed),
                        PermissionClosedResult,
                        timeout=CLOSE_TIMEOUT_S,
                    )
                except Exception as exc:  # noqa: BLE001 -- best effort: the prompt expires there anyway
                    logger.debug("approval %s not closed on %s: %s", request_id, relay.name, exc)

    def settled(self, request_id: str) -> str | None:
        """How a request that is no longer pending ended (``allowed by channel:console``, ``timed
        out``, ...), or None when this process never asked it."""
        pending = self._pending.get(request_id)
        if pending is not None and pending.done.is_set():
            return f"{'allowed' if pending.behavior == 'allow' else 'denied'} by {pending.decided_by}"
        return self._settled.get(request_id)

    def _answered(self, pending: _Pending, behavior: Literal["allow", "deny"], by: str) -> None:
        outcome = {"timeout": "timed out", "unavailable": "denied: no operator was connected"}.get(
            by, f"{'allowed' if behavior == 'allow' else 'denied'} by {pending.approver or by}"
        )
        self._settled[pending.request_id] = outcome
        while len(self._settled) > SETTLED_KEPT:
            del self._settled[next(iter(self._settled))]
        waited = (time.monotonic() - pending.asked_at) * 1000
        self._record(
            ApprovalAnsweredBody(
                request_id=pending.request_id,
                behavior=behavior,
                answered_by=by[:200] or "-",
                waited_ms=round(waited, 1),
                approver=pending.approver[:200] or None,
            )
        )

    def resolve(
        self, request_id: str, behavior: Literal["allow", "deny"], source: str, decided_by: str = ""
    ) -> bool:
        """Apply a verdict; False when the id is unknown, already answered or expired (single use).

        ``decided_by`` names who answered for the channels to show (default: the channel)."""
        pending = self._pending.get(request_id)
        if pending is None or pending.done.is_set():
            logger.info("ignoring verdict for %s from %s: not pending", request_id, source)
            return False
        if source not in pending.asked and source not in OPERATOR_SURFACES:
            # A verdict from a channel the prompt never went to (another binding): not an answer.
            logger.warning(
                "ignoring verdict for %s from %s: the prompt went only to %s",
                request_id,
                source,
                ", ".join(sorted(pending.asked)) or "nobody",
            )
            return False
        pending.behavior = behavior
        pending.answered_by = source
        pending.decided_by = decided_by[:DECIDED_BY_MAX] or source.removeprefix("channel:")
        if source in OPERATOR_SURFACES:
            pending.approver = pending.decided_by
        pending.done.set()
        return True

    def withdraw(self, call_id: str, behavior: Literal["allow", "deny"], by: str) -> bool:
        """Settle the prompt asked for ``call_id`` because ``by`` (``dashboard:ana``, ``cli``) already
        did or refused what it asks; the channels that show it are told so. False when none waits."""
        waiting = [p for p in self._pending.values() if p.call_id == call_id and not p.done.is_set()]
        for pending in waiting:
            pending.behavior, pending.withdrawn = behavior, True
            pending.answered_by = by.split(":", 1)[0][:DECIDED_BY_MAX] or "-"
            pending.decided_by = pending.approver = by[:DECIDED_BY_MAX]
            pending.done.set()
        return bool(waiting)

    def pending(self) -> list[dict[str, Any]]:
        """The prompts waiting for an answer, oldest first, as an operator surface lists them."""
        return [
            {
                "request_id": p.request_id,
                "agent": self._agent,
                "tool": p.tool,
                "description": p.description,
                "preview": p.preview,
                "origin": p.origin,
                "asked": sorted(p.asked),
                "asked_at": p.asked_at_wall,
            }
            for p in sorted(self._pending.values(), key=lambda p: p.asked_at)
            if not p.done.is_set()
        ]

    @property
    def open_requests(self) -> list[str]:
        return sorted(self._pending)
