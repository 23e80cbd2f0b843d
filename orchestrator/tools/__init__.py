"""Tools the orchestrator itself offers the model (no server behind them)."""

from orchestrator.tools.local import GoalContext, LocalTool, LocalTools, local_catalog_tools

__all__ = ["GoalContext", "LocalTool", "LocalTools", "local_catalog_tools"]
