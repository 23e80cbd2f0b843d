"""Approvals: the interim gate (read-only tools run, everything else asks the operator)."""

from orchestrator.permissions.approvals import ApprovalBroker, call_hash
from orchestrator.permissions.gate import OperatorGate

__all__ = ["ApprovalBroker", "OperatorGate", "call_hash"]
