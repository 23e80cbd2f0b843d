"""The sentences of limit notices: whole sentences, and a "waits until" that names what ends the wait."""

from __future__ import annotations

from datetime import datetime

from orchestrator.proactive.limits import LimitHit
from orchestrator.proactive.spend import BudgetHit


def sentence(text: str) -> str:
    """``text`` as one sentence: capitalised, ending in a full stop."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _minute(moment: datetime) -> str:
    return moment.isoformat(timespec="minutes")


def action_cap_text(source: str, agent: str, hit: LimitHit) -> str:
    """What the operator is told when an action cap stops an unattended turn."""
    until = f"until {_minute(hit.retry_at)}" if hit.retry_at else "until its next cycle"
    return f"{source}: {sentence(hit.reason)} Proactive work of {agent} is paused {until}."


def budget_text(source: str, hit: BudgetHit) -> str:
    """What the operator is told when a spend budget stops an unattended turn."""
    if hit.resets_at is not None:
        wait = f"Work that needs the model waits until {_minute(hit.resets_at)}."
    elif hit.axis.startswith("heartbeat_"):
        wait = "This heartbeat stops here; the next heartbeat starts with a fresh budget."
    else:
        wait = "This goal stops here; the next goal starts with a fresh budget."
    return f"{source}: {sentence(hit.reason)} {wait}"
