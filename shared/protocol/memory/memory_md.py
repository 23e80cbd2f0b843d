"""MEMORY.md over the wire: consolidation's promotions into it, its history, and a rollback of it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.memory.meta import AgentId
from shared.protocol.memory_terms import MAX_HISTORY


class Promotion(WireModel):
    """A memory consolidation copied into the agent's MEMORY.md (the ledger's ``memory_promotion``)."""

    memory_id: int
    reason: str


class ConsolidateParams(WireParams):
    agent: AgentId | None = None


class ConsolidateResult(WireResult):
    agent: str
    scored: int
    promoted: list[int]
    archived: list[int]
    """The lowest ids the pass archived, at most 100 of them (all when ``archived_count`` is no more)."""
    archived_count: int = 0
    """How many memories the pass archived."""
    skipped: list[str]
    """Why some warm memories were not promoted (e.g. MEMORY.md is at its budget)."""
    promotions: list[Promotion] = Field(default_factory=list)
    """The promoted memories with the reason each was promoted."""


class RollbackParams(WireParams):
    agent: AgentId | None = None
    rev: str = Field(min_length=4, max_length=64)


class RollbackResult(WireResult):
    rev: str
    """The new revision that restores the old content (history is never rewritten)."""
    content: str


class HistoryParams(WireParams):
    agent: AgentId | None = None
    limit: int = Field(20, ge=1, le=MAX_HISTORY)
    rev: str | None = Field(None, min_length=4, max_length=64)
    """A revision (full or a prefix of at least 4 characters) whose change to show as ``diff``."""


class HistoryRevision(WireModel):
    rev: str
    when: str
    """ISO 8601 with the offset."""
    message: str


class HistoryResult(WireResult):
    content: str
    """MEMORY.md as it is now."""
    revisions: list[HistoryRevision]
    """Newest first; any ``rev`` (or a prefix of at least 4 characters) can be rolled back to."""
    diff: str | None = None
    """With ``rev``: that revision's change to MEMORY.md as a unified diff against the revision before
    it (the whole file, added, for the first one)."""


class ConsolidateRequest(WireRequest[ConsolidateParams, Literal["nexo/memory/consolidate"]]):
    method: Literal["nexo/memory/consolidate"] = "nexo/memory/consolidate"


class RollbackRequest(WireRequest[RollbackParams, Literal["nexo/memory/rollback"]]):
    method: Literal["nexo/memory/rollback"] = "nexo/memory/rollback"


class HistoryRequest(WireRequest[HistoryParams, Literal["nexo/memory/history"]]):
    method: Literal["nexo/memory/history"] = "nexo/memory/history"
