"""Which configured server plays which role: the audit trail, the schedules, the pairings."""

from __future__ import annotations

from orchestrator.config.strict import StrictModel


class AuditOptions(StrictModel):
    server: str = "audit"
    """The audit server (a key of ``servers``): goals, turns, tool calls and approvals are recorded
    there. Without it nexo runs, but nothing is recorded and `nexo agent ps` has nothing to show."""


class CronOptions(StrictModel):
    server: str = "cron"
    """The cron server (a key of ``servers``): schedules, fires and the reminder tool live there."""


class PairingOptions(StrictModel):
    server: str = "pairing"
    """The pairing server (a key of ``servers``) that holds paired senders, codes and lockouts.
    Without it only each channel's ``pairing.allow_from`` senders reach the model."""
