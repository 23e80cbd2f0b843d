"""Permissions: the policy deciding each tool call, auto-approve, and approvals relayed to the operator."""

from orchestrator.permissions.approvals import ApprovalBroker, call_hash, decider
from orchestrator.permissions.autoapprove import AutoDecision, auto_approve
from orchestrator.permissions.commands import destructive_reason, edits_in_place, is_read_only_command
from orchestrator.permissions.gate import Approver, Notify, OperatorGate, PolicyGate
from orchestrator.permissions.policy import (
    PermissionPolicy,
    PolicyDecision,
    PolicyEngine,
    RateLimit,
    TierTable,
)
from orchestrator.permissions.preview import approval_preview, origin_line

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
