"""Approvals answered from an operator surface (the dashboard) through the control socket.

The surface is one more place a prompt can be answered: the same brokers, the same rule (the first
answer wins, a request id is single use), and the ledger records the surface as the channel that
answered and the operator named by the surface as the approver.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from orchestrator.permissions.approvals import OPERATOR_SURFACES, ApprovalBroker

PAIRING_VERDICTS: dict[str, Literal["allow", "deny"]] = {
    "nexo/pairing/approve": "allow",
    "nexo/pairing/deny": "deny",
}
"""Forwarded pairing requests that settle a pending pairing, and so its one-tap prompt."""


def pairing_prompt_call(pending_id: str) -> str:
    """The call id the pairing gate asks the operator's one-tap prompt under, for one pending request."""
    return f"pair:{pending_id}"


def pending_approvals(brokers: Iterable[ApprovalBroker]) -> dict[str, Any]:
    waiting = [row for broker in brokers for row in broker.pending()]
    return {"approvals": sorted(waiting, key=lambda row: float(row["asked_at"]))}


def answer_approval(brokers: Iterable[ApprovalBroker], request: dict[str, Any]) -> dict[str, Any]:
    """``{"op": "approve", "request_id": ID, "behavior": "allow"|"deny", "surface": "dashboard",
    "operator": NAME}``: applied when the prompt still waits, refused (and why) when not."""
    request_id, behavior = request.get("request_id"), request.get("behavior")
    surface, operator = request.get("surface"), str(request.get("operator") or "")[:80]
    if behavior not in ("allow", "deny"):
        return {"error": f"behavior must be allow or deny, not {behavior!r}"}
    if surface not in OPERATOR_SURFACES:
        return {"error": f"unknown operator surface {surface!r}; expected one of {sorted(OPERATOR_SURFACES)}"}
    if not isinstance(request_id, str) or not request_id:
        return {"error": "approve needs the request_id of a pending approval"}
    decided_by = f"{surface}:{operator}" if operator else surface
    for broker in brokers:
        if broker.resolve(request_id, behavior, surface, decided_by):
            return {"answered": request_id, "behavior": behavior}
    ended = next((how for broker in brokers if (how := broker.settled(request_id))), None)
    if ended is not None:
        return {"error": f"request {request_id} was already answered: {ended}"}
    return {"error": f"no pending approval {request_id!r} (answered, expired, or asked before a restart)"}


def withdraw_pairing_prompts(
    brokers: Iterable[ApprovalBroker], request: dict[str, Any], answer: dict[str, Any]
) -> None:
    """After a forwarded ``nexo/pairing/approve`` or ``deny`` succeeded (from the dashboard, or any
    client of the control socket), withdraw the one-tap prompt the gate raised for the same pending
    request: the operator decided once and is not asked again."""
    behavior = PAIRING_VERDICTS.get(str(request.get("method")))
    result = answer.get("result")
    if behavior is None or not isinstance(result, dict):
        return
    params, settled = request.get("params"), result.get("request")
    params = params if isinstance(params, dict) else {}
    settled = settled if isinstance(settled, dict) else {}
    pending_id = settled.get("pending_id") or params.get("pending_id")
    if not isinstance(pending_id, str) or not pending_id:
        return
    by = str(params.get("by") or "cli")
    for broker in brokers:
        broker.withdraw(pairing_prompt_call(pending_id), behavior, by)
