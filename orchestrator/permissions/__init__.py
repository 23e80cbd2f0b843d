"""Permissions: the policy deciding each tool call, auto-approve, and approvals relayed to the operator.

The policy's settings and engine load with the package; the approval relay and the gates (which
speak MCP) on first use (PEP 562), so reading a config never imports the MCP SDK.
"""

from typing import TYPE_CHECKING

from orchestrator.permissions.autoapprove import AutoDecision, auto_approve
from orchestrator.permissions.commands import destructive_reason, edits_in_place, is_read_only_command
from orchestrator.permissions.policy import (
    PermissionPolicy,
    PolicyDecision,
    PolicyEngine,
    RateLimit,
    TierTable,
)
from shared.lazy import lazy_names

if TYPE_CHECKING:
    from orchestrator.permissions.approvals import ApprovalBroker, call_hash, decider
    from orchestrator.permissions.gate import Approver, Notify, OperatorGate, PolicyGate
    from orchestrator.permissions.preview import approval_preview, origin_line

_MACHINERY = {
    "ApprovalBroker": "orchestrator.permissions.approvals",
    "call_hash": "orchestrator.permissions.approvals",
    "decider": "orchestrator.permissions.approvals",
    "Approver": "orchestrator.permissions.gate",
    "Notify": "orchestrator.permissions.gate",
    "OperatorGate": "orchestrator.permissions.gate",
    "PolicyGate": "orchestrator.permissions.gate",
    "approval_preview": "orchestrator.permissions.preview",
    "origin_line": "orchestrator.permissions.preview",
}


__getattr__ = lazy_names(__name__, _MACHINERY)


__all__ = [
    "ApprovalBroker",
    "Approver",
    "AutoDecision",
    "Notify",
    "OperatorGate",
    "PermissionPolicy",
    "PolicyDecision",
    "PolicyEngine",
    "PolicyGate",
    "RateLimit",
    "TierTable",
    "approval_preview",
    "auto_approve",
    "call_hash",
    "decider",
    "destructive_reason",
    "edits_in_place",
    "is_read_only_command",
    "origin_line",
]
