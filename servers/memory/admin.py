"""The memory server's control plane: custom request methods that no model ever sees as tools.

The orchestrator resolves and appends session transcripts here; the operator's ``nexo memory``
commands search, list, forget, export, import, reindex, show the history of MEMORY.md, roll back
and count; ``nexo/memory/metrics`` gives the server's Prometheus metrics. Each method is one small
handler over :class:`MemoryService`; a refusal comes back as ``INVALID_PARAMS`` with the service's
message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding

from servers.memory.errors import MemoryRefused
from servers.memory.service import MemoryService
from servers.memory.sessions import UnknownSession
from servers.memory.settings import MemorySettings
from shared.protocol.memory.admin import (
    EmbedderInfo,
    ExportParams,
    ExportResult,
    ForgetParams,
    ForgetResult,
    ImportParams,
    ImportResult,
    ListParams,
    ListResult,
    MetricsParams,
    MetricsResult,
    ReindexParams,
    ReindexResult,
    SearchParams,
    SearchResult,
    StatsParams,
    StatsResult,
)
from shared.protocol.memory.memory_md import (
    ConsolidateParams,
    ConsolidateResult,
    HistoryParams,
    HistoryResult,
    HistoryRevision,
    RollbackParams,
    RollbackResult,
)
from shared.protocol.memory.methods import (
    CONSOLIDATE_METHOD,
    EXPORT_METHOD,
    FORGET_METHOD,
    HISTORY_METHOD,
    IMPORT_METHOD,
    LIST_METHOD,
    MEMORY_EXTENSION,
    METHODS,
    METRICS_METHOD,
    REINDEX_METHOD,
    ROLLBACK_METHOD,
    SEARCH_METHOD,
    SESSION_APPEND_METHOD,
    SESSION_GC_METHOD,
    SESSION_HISTORY_METHOD,
    SESSION_RESOLVE_METHOD,
    STATS_METHOD,
)
from shared.protocol.memory.sessions import (
    SessionAppendParams,
    SessionAppendResult,
    SessionGcParams,
    SessionGcResult,
    SessionHistoryParams,
    SessionHistoryResult,
    SessionResolveParams,
    SessionResolveResult,
)

P = TypeVar("P", bound=types.RequestParams)
R = TypeVar("R", bound=types.Result)
Handler = Callable[[MemoryService, P], Awaitable[R]]
Report = Callable[[float, float | None, str | None], Awaitable[None]]
"""``notifications/progress`` for the current request; a no-op unless the caller sent a token."""
ReportingHandler = Callable[[MemoryService, P, Report], Awaitable[R]]


def _bind(method: str, params: type[P], handler: Handler[P, R]) -> MethodBinding:
    async def serve(ctx: ServerRequestContext[Any, Any], request: P) -> R:
        service: MemoryService = ctx.lifespan_context
        try:
            return await handler(service, request)
        except MemoryRefused as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc

    return MethodBinding(method, params, serve)


def _bind_reporting(method: str, params: type[P], handler: ReportingHandler[P, R]) -> MethodBinding:
    """Like :func:`_bind`, for the long methods that report progress (import, reindex)."""

    async def serve(ctx: ServerRequestContext[Any, Any], request: P) -> R:
        service: MemoryService = ctx.lifespan_context
        try:
            return await handler(service, request, ctx.session.report_progress)
        except MemoryRefused as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from exc

    return MethodBinding(method, params, serve)


class MemoryAdmin(Extension):
    identifier = MEMORY_EXTENSION

    def __init__(self, settings: MemorySettings) -> None:
        self._settings = settings

    def settings(self) -> dict[str, Any]:
        return self.advertised(self._settings)

    @staticmethod
    def advertised(settings: MemorySettings) -> dict[str, Any]:
        return {
            "methods": list(METHODS),
            "default_agent": settings.default_agent,
            "max_content_bytes": settings.max_content_bytes,
        }

    @classmethod
    def experimental(cls, settings: MemorySettings) -> dict[str, dict[str, Any]]:
        """The handshake-era advertisement (extensions only appear in 2026-07-28 discovery)."""
        return {MEMORY_EXTENSION: cls.advertised(settings)}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            _bind(SESSION_RESOLVE_METHOD, SessionResolveParams, _session_resolve),
            _bind(SESSION_APPEND_METHOD, SessionAppendParams, _session_append),
            _bind(SESSION_HISTORY_METHOD, SessionHistoryParams, _session_history),
            _bind(SESSION_GC_METHOD, SessionGcParams, _session_gc),
            _bind(SEARCH_METHOD, SearchParams, _search),
            _bind(LIST_METHOD, ListParams, _list),
            _bind(FORGET_METHOD, ForgetParams, _forget),
            _bind(EXPORT_METHOD, ExportParams, _export),
            _bind_reporting(IMPORT_METHOD, ImportParams, _import),
            _bind_reporting(REINDEX_METHOD, ReindexParams, _reindex),
            _bind(ROLLBACK_METHOD, RollbackParams, _rollback),
            _bind(HISTORY_METHOD, HistoryParams, _history),
            _bind(STATS_METHOD, StatsParams, _stats),
            _bind(CONSOLIDATE_METHOD, ConsolidateParams, _consolidate),
            _bind(METRICS_METHOD, MetricsParams, _metrics),
        )


# -- sessions ----------------------------------------------------------------------------------


async def _session_resolve(service: MemoryService, params: SessionResolveParams) -> SessionResolveResult:
    resolved = await service.sessions.resolve(params.agent, params.session_key)
    return SessionResolveResult(
        session_id=resolved.session_id,
        created=resolved.created,
        previous_active_at=resolved.previous_active_at,
        entries=resolved.entries,
    )


async def _session_append(service: MemoryService, params: SessionAppendParams) -> SessionAppendResult:
    appended, consolidated = await service.append_transcript(params.agent, params.session_id, params.entries)
    return SessionAppendResult(
        appended=appended.appended,
        duplicates=appended.duplicates,
        trimmed=appended.trimmed,
        consolidated=consolidated is not None,
        promotions=[] if consolidated is None else consolidated.promotions,
    )


async def _session_history(service: MemoryService, params: SessionHistoryParams) -> SessionHistoryResult:
    try:
        entries = await service.sessions.history(params.agent, params.session_id, params.limit)
    except UnknownSession as exc:
        raise MemoryRefused(
            f"agent {params.agent!r} has no session {params.session_id!r}; resolve the session key again"
        ) from exc
    return SessionHistoryResult(entries=entries)


async def _session_gc(service: MemoryService, params: SessionGcParams) -> SessionGcResult:
    idle_s = params.idle_s if params.idle_s is not None else service.settings.session_idle_gc_s
    return SessionGcResult(removed=await service.sessions.gc(idle_s))


# -- operator ----------------------------------------------------------------------------------


async def _search(service: MemoryService, params: SearchParams) -> SearchResult:
    recalled = await service.recall(
        params.agent or service.settings.default_agent,
        params.query,
        mode=params.mode,
        limit=params.limit,
        touch=False,  # the operator looking does not make a memory warmer for the agent
    )
    return SearchResult(memories=[m.record() for m in recalled.memories], mode=recalled.mode)


async def _list(service: MemoryService, params: ListParams) -> ListResult:
    page = await service.store.page(
        agent=params.agent,
        kind=params.kind,
        after_id=params.after_id,
        limit=params.limit,
        include_archived=params.include_archived,
    )
    last = page[-1].id if len(page) == params.limit else None
    remaining = 0
    if last is not None:
        remaining = await service.store.count_page(
            agent=params.agent, kind=params.kind, after_id=last, include_archived=params.include_archived
        )
    return ListResult(
        memories=[m.record() for m in page], next_after_id=last if remaining else None, remaining=remaining
    )


async def _forget(service: MemoryService, params: ForgetParams) -> ForgetResult:
    return ForgetResult(forgotten=(await service.forget(params.agent, params.id)).record())


async def _export(service: MemoryService, params: ExportParams) -> ExportResult:
    page = await service.store.page(agent=params.agent, after_id=params.after_id, limit=params.limit)
    last = page[-1].id if len(page) == params.limit else None
    return ExportResult(
        records=[m.record() for m in page],
        next_after_id=last,
        total=await service.store.count(agent=params.agent),
    )


async def _import(service: MemoryService, params: ImportParams, report: Report) -> ImportResult:
    total = len(params.records)
    await report(0, total, f"importing {total} records")
    imported, refreshed, rejected = await service.import_records(params.records)
    await report(total, total, f"{imported} imported, {refreshed} refreshed, {len(rejected)} rejected")
    return ImportResult(imported=imported, refreshed=refreshed, rejected=rejected)


async def _reindex(service: MemoryService, params: ReindexParams, report: Report) -> ReindexResult:
    progress = await service.reindexer.step(params.batch_size)
    await report(progress.done, progress.total, "reindexed" if progress.finished else "reindexing")
    return ReindexResult(
        done=progress.done,
        total=progress.total,
        finished=progress.finished,
        model_id=service.model.model_id,
        dim=service.model.dim,
    )


async def _rollback(service: MemoryService, params: RollbackParams) -> RollbackResult:
    rev, content = await service.notebooks.rollback(
        params.agent or service.settings.default_agent, params.rev
    )
    return RollbackResult(rev=rev, content=content)


async def _history(service: MemoryService, params: HistoryParams) -> HistoryResult:
    agent = params.agent or service.settings.default_agent
    notes = await service.notebooks.notes(agent, params.limit)
    return HistoryResult(
        diff=await service.notebooks.diff(agent, params.rev) if params.rev else None,
        content=notes.content,
        revisions=[
            HistoryRevision(rev=r.rev, when=r.when.isoformat(timespec="seconds"), message=r.message)
            for r in notes.revisions
        ],
    )


async def _stats(service: MemoryService, params: StatsParams) -> StatsResult:
    counts = await service.store.counts()
    sessions, entries = await service.sessions.totals()
    model = service.model
    return StatsResult(
        total=counts.total,
        archived=counts.archived,
        by_agent=counts.by_agent,
        by_kind=counts.by_kind,
        by_provenance=counts.by_provenance,
        sessions=sessions,
        transcript_entries=entries,
        vectors=await service.store.index.count(),
        db_bytes=service.db_bytes(),
        embedder=EmbedderInfo(
            model_id=model.model_id,
            dim=model.dim,
            recorded_model_id=model.recorded_id,
            recorded_dim=model.recorded_dim,
            reindex_needed=model.blocker() is not None,
        ),
    )


async def _consolidate(service: MemoryService, params: ConsolidateParams) -> ConsolidateResult:
    consolidation = await service.consolidate(params.agent or service.settings.default_agent)
    report = consolidation.report
    return ConsolidateResult(
        agent=report.agent,
        scored=report.scored,
        promoted=report.promoted,
        archived=report.archived,
        archived_count=report.archived_count,
        skipped=report.skipped,
        promotions=consolidation.promotions,
    )


async def _metrics(service: MemoryService, params: MetricsParams) -> MetricsResult:
    # Read at every scrape: the two figures the metrics show, not the full counts of `nexo memory stats`.
    service.metrics.count_memories(*await service.store.states())
    service.metrics.count_vectors(*service.store.index.filed())
    return MetricsResult(text=service.metrics.render())
