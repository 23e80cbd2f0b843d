"""Goals as the audit server records them: the ledger sink, the tracker and the loop's observer."""

from orchestrator.goals.observer import LedgerObserver
from orchestrator.goals.sink import AuditSink
from orchestrator.goals.tracker import GoalTracker, TrackedGoal

__all__ = ["AuditSink", "GoalTracker", "LedgerObserver", "TrackedGoal"]
