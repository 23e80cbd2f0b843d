"""Inbound: pull durable channel events, run a goal per message, reply once, then acknowledge."""

from orchestrator.intake.intake import Intake
from orchestrator.intake.outbound import ReplySender

__all__ = ["Intake", "ReplySender"]
