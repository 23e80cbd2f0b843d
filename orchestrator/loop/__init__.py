"""The reasoning loop: a goal runs turns of model call -> gated tool calls -> results, within budgets."""

from orchestrator.loop.goal import GoalResult, Observer, Outcome, TurnTiming, run_goal
from orchestrator.loop.tools import Decision, Gate, ToolRunner

__all__ = ["Decision", "Gate", "GoalResult", "Observer", "Outcome", "ToolRunner", "TurnTiming", "run_goal"]
