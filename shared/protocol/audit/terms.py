"""The audit contract's vocabulary and limits, without the wire models: importing it costs no pydantic."""

from __future__ import annotations

from typing import Literal, get_args

from shared.protocol import goal_terms as _goal_terms

AUDIT_EXTENSION = "nexo/audit"
TAIL_METHOD = "nexo/audit/tail"
"""``nexo audit tail`` asks the running daemon with this name (``methods.TailRequest``'s)."""
MAX_APPEND = 500
MAX_TAIL = 1_000
MAX_SUBJECT = 500
GOAL_NOT_FOUND = _goal_terms.GOAL_NOT_FOUND
TRANSITION_REFUSED = -32049
"""JSON-RPC error code for a goal status change the lifecycle does not allow."""

EntryKind = Literal[
    "turn", "tool_call", "approval_requested", "approval_answered", "pairing", "channel", "cron_fire",
    "memory_promotion", "config_change", "goal", "notice", "checkpoint", "spend_reserved",
]  # fmt: skip
ToolOutcome = Literal["ok", "error", "cancelled", "timeout", "rate_limited", "denied"]
GoalKind = _goal_terms.GoalKind
GoalStatus = Literal[
    "running", "sleeping", "queued", "paused", "done", "failed", "cancelled", "lost_on_restart"
]
ProblemKind = Literal["hash_mismatch", "seq_gap", "prev_link_broken", "checkpoint_mismatch", "head_mismatch"]

ENTRY_KINDS: tuple[str, ...] = get_args(EntryKind)
GOAL_KINDS = _goal_terms.GOAL_KINDS
TERMINAL_STATUSES = _goal_terms.TERMINAL_STATUSES
