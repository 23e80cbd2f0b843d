"""Memories as the operator sees them: one record (also one export line) and one record to import."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from shared.protocol.deferred import WireModel
from shared.protocol.memory.meta import AgentId, Provenance
from shared.protocol.memory_terms import Kind

MAX_PAGE = 500
"""The most records (or transcript entries) one page returns."""
MAX_IMPORT = 500


class MemoryRecord(WireModel):
    """One memory as the operator sees it (raw content, never wrapped). Also one export line."""

    id: int
    agent: str
    content: str
    tags: list[str]
    kind: Kind
    provenance: Provenance
    importance: float
    created_at: float
    last_accessed_at: float
    access_count: int
    archived: bool
    promoted: bool
    """Already copied into the agent's MEMORY.md by consolidation."""


class ImportRecord(WireModel):
    """One memory to import. Export lines import as they are: their ``id`` and ``promoted`` are ignored."""

    model_config = ConfigDict(extra="ignore")

    agent: AgentId
    content: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    kind: Kind = "note"
    provenance: Provenance = "owner"
    importance: float = Field(0.5, ge=0.0, le=1.0)
    created_at: float | None = None
    last_accessed_at: float | None = None
    access_count: int = Field(0, ge=0)
    archived: bool = False
