"""What the tools of ``nexo mcp-server`` return: each model is a tool's output schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.protocol.audit.entries import Entry, VerifyReport
from shared.protocol.audit.goals import Goal
from shared.protocol.cron import Entry as CronEntry
from shared.protocol.memory.memory_md import HistoryRevision
from shared.protocol.memory.records import MemoryRecord
from shared.protocol.pairing import PairedRecord, PendingRequest

Tier = Literal["read", "act", "admin"]
TIERS: tuple[Tier, ...] = ("read", "act", "admin")


class Recalled(BaseModel):
    memories: list[MemoryRecord]
    mode: str


class MemoryFile(BaseModel):
    agent: str
    content: str
    """MEMORY.md as it is now."""
    revisions: list[HistoryRevision]


class GoalList(BaseModel):
    goals: list[Goal]
    running: int
    max_running: int


class LedgerEntries(BaseModel):
    entries: list[Entry]
    """Oldest first."""


class SearchHits(BaseModel):
    hits: list[dict[str, Any]]


class Verified(BaseModel):
    report: VerifyReport


class CronEntries(BaseModel):
    entries: list[CronEntry]


class ChannelState(BaseModel):
    name: str
    state: str
    detail: dict[str, Any] = Field(default_factory=dict)


class Channels(BaseModel):
    daemon_running: bool
    channels: list[ChannelState]


class Pairings(BaseModel):
    records: list[PairedRecord]
    pending: list[PendingRequest]


class GoalOutcome(BaseModel):
    goal_id: str
    agent: str
    status: str
    """The outcome (done, failed, budget_exhausted, ...), or started for a background goal."""
    summary: str
    """What happened, in a line; for a background goal, how to follow it."""
    text: str | None = None
    """The agent's final answer, when it gave one."""
    report: dict[str, Any] = Field(default_factory=dict)


class Cancelled(BaseModel):
    cancelled: str


class Remembered(BaseModel):
    imported: int
    refreshed: int


class Forgotten(BaseModel):
    forgotten: MemoryRecord


class CronChanged(BaseModel):
    entry: CronEntry


class CronDeleted(BaseModel):
    deleted: str


class Paired(BaseModel):
    record: PairedRecord


class Revoked(BaseModel):
    revoked: int


class Sent(BaseModel):
    sent: bool
    agent: str
    server: str
    chat_id: str
    idempotency_key: str
    """The key the message was sent under: repeat it to retry without sending twice."""
    redacted: bool
    """True when secrets in the text were replaced by ``[REDACTED:<rule id>]`` before sending."""
