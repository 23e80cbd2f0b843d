"""Inbound: pull durable channel events, run a goal per message, reply once, then acknowledge.

The package's names load on first use, so a light reader of one module (``nexo status`` wording a
pairing refusal from :mod:`orchestrator.intake.refusals`) does not import the whole intake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.intake.intake import Intake
    from orchestrator.intake.outbound import ReplySender

__all__ = ["Intake", "ReplySender"]


def __getattr__(name: str) -> Any:
    if name == "Intake":
        from orchestrator.intake.intake import Intake

        return Intake
    if name == "ReplySender":
        from orchestrator.intake.outbound import ReplySender

        return ReplySender
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
