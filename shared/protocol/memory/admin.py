"""The operator's calls over the memories: search, list, forget, export, import, reindex, stats, metrics."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.protocol.deferred import WireModel, WireParams, WireRequest, WireResult
from shared.protocol.memory.meta import AgentId
from shared.protocol.memory.records import MAX_IMPORT, MAX_PAGE, ImportRecord, MemoryRecord
from shared.protocol.memory_terms import MAX_REINDEX_BATCH, MAX_SEARCH_LIMIT, Kind, RecallMode


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


class EmbedderInfo(WireModel):
    model_id: str
    dim: int
    recorded_model_id: str | None = None
    recorded_dim: int | None = None
    reindex_needed: bool


class StatsParams(WireParams):
    pass


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


class MetricsParams(WireParams):
    pass


class MetricsResult(WireResult):
    text: str
    """The server's metrics in the Prometheus text format (recall latency, memories, import rate)."""


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


class StatsRequest(WireRequest[StatsParams, Literal["nexo/memory/stats"]]):
    method: Literal["nexo/memory/stats"] = "nexo/memory/stats"


class MetricsRequest(WireRequest[MetricsParams, Literal["nexo/memory/metrics"]]):
    method: Literal["nexo/memory/metrics"] = "nexo/memory/metrics"
