"""The wire contract of the memory server's control plane, and the `_meta` keys of its tools.

Model-facing tools (``memory_remember``, ``memory_recall``, ...) never take the agent id or the
provenance as arguments: a model must not choose whose memories it reads or how far its words are
trusted. The orchestrator puts both in the ``_meta`` of each ``tools/call`` under
:data:`AGENT_META_KEY` and :data:`PROVENANCE_META_KEY`.

Everything else the orchestrator and the operator's CLI need (session transcripts, search, export,
import, reindex, rollback, history, stats) is a custom JSON-RPC request method under ``nexo/memory/``, so it
never appears in any model's tool list. Send them with
``client.session.send_request(Request(params=...), Result)``.
Wire models only: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Literal, cast

import mcp_types as types
from pydantic import ConfigDict, Field

from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.memory_terms import KINDS as KINDS
from shared.protocol.memory_terms import MAX_HISTORY as MAX_HISTORY
from shared.protocol.memory_terms import MAX_REINDEX_BATCH as MAX_REINDEX_BATCH
from shared.protocol.memory_terms import MAX_SEARCH_LIMIT as MAX_SEARCH_LIMIT
from shared.protocol.memory_terms import RECALL_MODES as RECALL_MODES
from shared.protocol.memory_terms import Kind as Kind
from shared.protocol.memory_terms import RecallMode as RecallMode

MEMORY_EXTENSION = "nexo/memory"
AGENT_META_KEY = "nexo/agent"
PROVENANCE_META_KEY = "nexo/provenance"

Provenance = Literal["owner", "paired_contact", "untrusted", "tool", "agent"]
PROVENANCES: tuple[Provenance, ...] = ("owner", "paired_contact", "untrusted", "tool", "agent")
QUOTED_PROVENANCES: frozenset[str] = frozenset({"paired_contact", "untrusted", "tool"})
"""Memories from these sources come back to a model wrapped as quoted data, never as instructions."""

Role = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "tool", "system")

AGENT_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
"""Agent ids as the orchestrator's config allows them; they also name a directory on disk."""
SESSION_KEY_MAX = 256
MAX_PAGE = 500
MAX_APPEND = 100
MAX_IMPORT = 500

SESSION_RESOLVE_METHOD = "nexo/memory/session/resolve"
SESSION_APPEND_METHOD = "nexo/memory/session/append"
SESSION_HISTORY_METHOD = "nexo/memory/session/history"
SESSION_GC_METHOD = "nexo/memory/session/gc"
SEARCH_METHOD = "nexo/memory/search"
LIST_METHOD = "nexo/memory/list"
FORGET_METHOD = "nexo/memory/forget"
EXPORT_METHOD = "nexo/memory/export"
IMPORT_METHOD = "nexo/memory/import"
REINDEX_METHOD = "nexo/memory/reindex"
ROLLBACK_METHOD = "nexo/memory/rollback"
HISTORY_METHOD = "nexo/memory/history"
STATS_METHOD = "nexo/memory/stats"
CONSOLIDATE_METHOD = "nexo/memory/consolidate"
METRICS_METHOD = "nexo/memory/metrics"

AgentId = Annotated[str, Field(pattern=AGENT_PATTERN)]


# --- records ------------------------------------------------------------------------------------


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


class TranscriptEntry(WireModel):
    role: Role
    content: str
    turn_id: str | None = Field(None, max_length=128)
    dedupe_key: str | None = Field(None, max_length=256)
    """Resending an entry with the same key to the same session stores it once (safe retries)."""


class StoredEntry(WireModel):
    id: int
    role: Role
    content: str
    turn_id: str | None = None
    at: float


# --- sessions -----------------------------------------------------------------------------------


class SessionResolveParams(WireParams):
    agent: AgentId
    session_key: str = Field(min_length=1, max_length=SESSION_KEY_MAX)


class SessionResolveResult(WireResult):
    session_id: int
    created: bool
    """False when the conversation already existed: reattach to it instead of starting over."""
    previous_active_at: float | None = None
    entries: int


class SessionAppendParams(WireParams):
    agent: AgentId
    session_id: int
    entries: list[TranscriptEntry] = Field(min_length=1, max_length=MAX_APPEND)


class Promotion(WireModel):
    """A memory consolidation copied into the agent's MEMORY.md (the ledger's ``memory_promotion``)."""

    memory_id: int
    reason: str


class SessionAppendResult(WireResult):
    appended: int
    duplicates: int
    trimmed: int
    """Oldest entries dropped to keep the session within its transcript cap."""
    consolidated: bool
    """True when these assistant turns triggered a consolidation pass."""
    promotions: list[Promotion] = Field(default_factory=list)
    """What that pass promoted; the orchestrator records one ``memory_promotion`` entry for each."""


class SessionHistoryParams(WireParams):
    agent: AgentId
    session_id: int
    limit: int = Field(50, ge=1, le=MAX_PAGE)


class SessionHistoryResult(WireResult):
    entries: list[StoredEntry]
    """Oldest first: the last ``limit`` entries of the session."""


class SessionGcParams(WireParams):
    idle_s: float | None = Field(None, gt=0)
    """Remove sessions idle longer than this; default from the server's settings."""


class SessionGcResult(WireResult):
    removed: int


# --- operator calls -----------------------------------------------------------------------------


class SearchParams(WireParams):
    query: str = Field(min_length=1)
    agent: AgentId | None = None
    mode: RecallMode = "hybrid"
    limit: int = Field(8, ge=1, le=MAX_SEARCH_LIMIT)


class SearchResult(WireResult):
    memories: list[MemoryRecord]
    mode: RecallMode
    """The mode actually used: ``keyword`` when hybrid search had to degrade."""


class ListParams(WireParams):
    agent: AgentId | None = None
    kind: Kind | None = None
    after_id: int = Field(0, ge=0)
    limit: int = Field(100, ge=1, le=MAX_PAGE)
    include_archived: bool = True


class ListResult(WireResult):
    memories: list[MemoryRecord]
    next_after_id: int | None = None
    """Pass as ``after_id`` for the next page; None after the last page."""
    remaining: int = 0
    """How many matching memories come after this page."""


class ForgetParams(WireParams):
    id: int
    agent: AgentId | None = None
    """When given, the memory must belong to this agent."""


class ForgetResult(WireResult):
    forgotten: MemoryRecord


class ExportParams(WireParams):
    agent: AgentId | None = None
    after_id: int = Field(0, ge=0)
    limit: int = Field(200, ge=1, le=MAX_PAGE)


class ExportResult(WireResult):
    records: list[MemoryRecord]
    next_after_id: int | None = None
    total: int


class ImportParams(WireParams):
    records: list[ImportRecord] = Field(min_length=1, max_length=MAX_IMPORT)


class ImportProblem(WireModel):
    index: int
    """Position of the record in this request's batch."""
    error: str


class ImportResult(WireResult):
    imported: int
    refreshed: int
    """Records whose exact content the agent already had: that memory was refreshed instead."""
    rejected: list[ImportProblem]


class ReindexParams(WireParams):
    batch_size: int = Field(64, ge=1, le=MAX_REINDEX_BATCH)


class ReindexResult(WireResult):
    done: int
    total: int
    finished: bool
    model_id: str
    dim: int


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


class EmbedderInfo(WireModel):
    model_id: str
    dim: int
    recorded_model_id: str | None = None
    recorded_dim: int | None = None
    reindex_needed: bool


class StatsParams(WireParams):
    pass


class MetricsParams(WireParams):
    pass


class MetricsResult(WireResult):
    text: str
    """The server's metrics in the Prometheus text format (recall latency, memories, import rate)."""


class StatsResult(WireResult):
    total: int
    archived: int
    by_agent: dict[str, int]
    by_kind: dict[str, int]
    by_provenance: dict[str, int]
    sessions: int
    transcript_entries: int
    vectors: int
    db_bytes: int
    embedder: EmbedderInfo


class ConsolidateParams(WireParams):
    agent: AgentId | None = None


class ConsolidateResult(WireResult):
    agent: str
    scored: int
    promoted: list[int]
    archived: list[int]
    skipped: list[str]
    """Why some warm memories were not promoted (e.g. MEMORY.md is at its budget)."""
    promotions: list[Promotion] = Field(default_factory=list)
    """The promoted memories with the reason each was promoted."""


# --- requests -----------------------------------------------------------------------------------


class SessionResolveRequest(WireRequest[SessionResolveParams, Literal["nexo/memory/session/resolve"]]):
    method: Literal["nexo/memory/session/resolve"] = "nexo/memory/session/resolve"


class SessionAppendRequest(WireRequest[SessionAppendParams, Literal["nexo/memory/session/append"]]):
    method: Literal["nexo/memory/session/append"] = "nexo/memory/session/append"


class SessionHistoryRequest(WireRequest[SessionHistoryParams, Literal["nexo/memory/session/history"]]):
    method: Literal["nexo/memory/session/history"] = "nexo/memory/session/history"


class SessionGcRequest(WireRequest[SessionGcParams, Literal["nexo/memory/session/gc"]]):
    method: Literal["nexo/memory/session/gc"] = "nexo/memory/session/gc"


class SearchRequest(WireRequest[SearchParams, Literal["nexo/memory/search"]]):
    method: Literal["nexo/memory/search"] = "nexo/memory/search"


class ListRequest(WireRequest[ListParams, Literal["nexo/memory/list"]]):
    method: Literal["nexo/memory/list"] = "nexo/memory/list"


class ForgetRequest(WireRequest[ForgetParams, Literal["nexo/memory/forget"]]):
    method: Literal["nexo/memory/forget"] = "nexo/memory/forget"


class ExportRequest(WireRequest[ExportParams, Literal["nexo/memory/export"]]):
    method: Literal["nexo/memory/export"] = "nexo/memory/export"


class ImportRequest(WireRequest[ImportParams, Literal["nexo/memory/import"]]):
    method: Literal["nexo/memory/import"] = "nexo/memory/import"


class ReindexRequest(WireRequest[ReindexParams, Literal["nexo/memory/reindex"]]):
    method: Literal["nexo/memory/reindex"] = "nexo/memory/reindex"


class RollbackRequest(WireRequest[RollbackParams, Literal["nexo/memory/rollback"]]):
    method: Literal["nexo/memory/rollback"] = "nexo/memory/rollback"


class HistoryRequest(WireRequest[HistoryParams, Literal["nexo/memory/history"]]):
    method: Literal["nexo/memory/history"] = "nexo/memory/history"


class StatsRequest(WireRequest[StatsParams, Literal["nexo/memory/stats"]]):
    method: Literal["nexo/memory/stats"] = "nexo/memory/stats"


class MetricsRequest(WireRequest[MetricsParams, Literal["nexo/memory/metrics"]]):
    method: Literal["nexo/memory/metrics"] = "nexo/memory/metrics"


class ConsolidateRequest(WireRequest[ConsolidateParams, Literal["nexo/memory/consolidate"]]):
    method: Literal["nexo/memory/consolidate"] = "nexo/memory/consolidate"


METHODS: tuple[str, ...] = (
    SESSION_RESOLVE_METHOD,
    SESSION_APPEND_METHOD,
    SESSION_HISTORY_METHOD,
    SESSION_GC_METHOD,
    SEARCH_METHOD,
    LIST_METHOD,
    FORGET_METHOD,
    EXPORT_METHOD,
    IMPORT_METHOD,
    REINDEX_METHOD,
    ROLLBACK_METHOD,
    HISTORY_METHOD,
    STATS_METHOD,
    CONSOLIDATE_METHOD,
    METRICS_METHOD,
)


def tool_meta(agent: str, provenance: Provenance) -> types.RequestParamsMeta:
    """The ``_meta`` the orchestrator sends with every memory tool call."""
    # RequestParamsMeta is an open TypedDict (PEP 728 extra_items) that mypy does not model yet.
    return cast(types.RequestParamsMeta, {AGENT_META_KEY: agent, PROVENANCE_META_KEY: provenance})
