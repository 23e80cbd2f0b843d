"""The wire contract of the memory server: its control plane and the ``_meta`` keys of its tools.

- :mod:`~shared.protocol.memory.meta`: the ``_meta`` of each tool call (whose memories, how far
  trusted), which a model never chooses;
- :mod:`~shared.protocol.memory.methods`: the extension's name and its control-plane methods;
- :mod:`~shared.protocol.memory.records`: memories as the operator sees, exports and imports them;
- :mod:`~shared.protocol.memory.sessions`: conversation transcripts;
- :mod:`~shared.protocol.memory.admin`: the operator's search, list, forget, export, import,
  reindex, stats and metrics;
- :mod:`~shared.protocol.memory.memory_md`: MEMORY.md's promotions, history and rollback.

Wire models only: no I/O. Every public name of these modules (and the vocabulary of
:mod:`shared.protocol.memory_terms`) stays importable from this package, for MCP clients and
channel authors written against it; each loads its own module on first use, so importing the
package costs nothing and a reader of one module does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.protocol.memory.admin import EmbedderInfo as EmbedderInfo
    from shared.protocol.memory.admin import ExportParams as ExportParams
    from shared.protocol.memory.admin import ExportRequest as ExportRequest
    from shared.protocol.memory.admin import ExportResult as ExportResult
    from shared.protocol.memory.admin import ForgetParams as ForgetParams
    from shared.protocol.memory.admin import ForgetRequest as ForgetRequest
    from shared.protocol.memory.admin import ForgetResult as ForgetResult
    from shared.protocol.memory.admin import ImportParams as ImportParams
    from shared.protocol.memory.admin import ImportProblem as ImportProblem
    from shared.protocol.memory.admin import ImportRequest as ImportRequest
    from shared.protocol.memory.admin import ImportResult as ImportResult
    from shared.protocol.memory.admin import ListParams as ListParams
    from shared.protocol.memory.admin import ListRequest as ListRequest
    from shared.protocol.memory.admin import ListResult as ListResult
    from shared.protocol.memory.admin import MetricsParams as MetricsParams
    from shared.protocol.memory.admin import MetricsRequest as MetricsRequest
    from shared.protocol.memory.admin import MetricsResult as MetricsResult
    from shared.protocol.memory.admin import ReindexParams as ReindexParams
    from shared.protocol.memory.admin import ReindexRequest as ReindexRequest
    from shared.protocol.memory.admin import ReindexResult as ReindexResult
    from shared.protocol.memory.admin import SearchParams as SearchParams
    from shared.protocol.memory.admin import SearchRequest as SearchRequest
    from shared.protocol.memory.admin import SearchResult as SearchResult
    from shared.protocol.memory.admin import StatsParams as StatsParams
    from shared.protocol.memory.admin import StatsRequest as StatsRequest
    from shared.protocol.memory.admin import StatsResult as StatsResult
    from shared.protocol.memory.memory_md import ConsolidateParams as ConsolidateParams
    from shared.protocol.memory.memory_md import ConsolidateRequest as ConsolidateRequest
    from shared.protocol.memory.memory_md import ConsolidateResult as ConsolidateResult
    from shared.protocol.memory.memory_md import HistoryParams as HistoryParams
    from shared.protocol.memory.memory_md import HistoryRequest as HistoryRequest
    from shared.protocol.memory.memory_md import HistoryResult as HistoryResult
    from shared.protocol.memory.memory_md import HistoryRevision as HistoryRevision
    from shared.protocol.memory.memory_md import Promotion as Promotion
    from shared.protocol.memory.memory_md import RollbackParams as RollbackParams
    from shared.protocol.memory.memory_md import RollbackRequest as RollbackRequest
    from shared.protocol.memory.memory_md import RollbackResult as RollbackResult
    from shared.protocol.memory.meta import AGENT_META_KEY as AGENT_META_KEY
    from shared.protocol.memory.meta import AGENT_PATTERN as AGENT_PATTERN
    from shared.protocol.memory.meta import PROVENANCE_META_KEY as PROVENANCE_META_KEY
    from shared.protocol.memory.meta import PROVENANCES as PROVENANCES
    from shared.protocol.memory.meta import QUOTED_PROVENANCES as QUOTED_PROVENANCES
    from shared.protocol.memory.meta import AgentId as AgentId
    from shared.protocol.memory.meta import Provenance as Provenance
    from shared.protocol.memory.meta import tool_meta as tool_meta
    from shared.protocol.memory.methods import CONSOLIDATE_METHOD as CONSOLIDATE_METHOD
    from shared.protocol.memory.methods import EXPORT_METHOD as EXPORT_METHOD
    from shared.protocol.memory.methods import FORGET_METHOD as FORGET_METHOD
    from shared.protocol.memory.methods import HISTORY_METHOD as HISTORY_METHOD
    from shared.protocol.memory.methods import IMPORT_METHOD as IMPORT_METHOD
    from shared.protocol.memory.methods import LIST_METHOD as LIST_METHOD
    from shared.protocol.memory.methods import MEMORY_EXTENSION as MEMORY_EXTENSION
    from shared.protocol.memory.methods import METHODS as METHODS
    from shared.protocol.memory.methods import METRICS_METHOD as METRICS_METHOD
    from shared.protocol.memory.methods import REINDEX_METHOD as REINDEX_METHOD
    from shared.protocol.memory.methods import ROLLBACK_METHOD as ROLLBACK_METHOD
    from shared.protocol.memory.methods import SEARCH_METHOD as SEARCH_METHOD
    from shared.protocol.memory.methods import SESSION_APPEND_METHOD as SESSION_APPEND_METHOD
    from shared.protocol.memory.methods import SESSION_GC_METHOD as SESSION_GC_METHOD
    from shared.protocol.memory.methods import SESSION_HISTORY_METHOD as SESSION_HISTORY_METHOD
    from shared.protocol.memory.methods import SESSION_RESOLVE_METHOD as SESSION_RESOLVE_METHOD
    from shared.protocol.memory.methods import STATS_METHOD as STATS_METHOD
    from shared.protocol.memory.records import MAX_IMPORT as MAX_IMPORT
    from shared.protocol.memory.records import MAX_PAGE as MAX_PAGE
    from shared.protocol.memory.records import ImportRecord as ImportRecord
    from shared.protocol.memory.records import MemoryRecord as MemoryRecord
    from shared.protocol.memory.sessions import MAX_APPEND as MAX_APPEND
    from shared.protocol.memory.sessions import ROLES as ROLES
    from shared.protocol.memory.sessions import SESSION_KEY_MAX as SESSION_KEY_MAX
    from shared.protocol.memory.sessions import Role as Role
    from shared.protocol.memory.sessions import SessionAppendParams as SessionAppendParams
    from shared.protocol.memory.sessions import SessionAppendRequest as SessionAppendRequest
    from shared.protocol.memory.sessions import SessionAppendResult as SessionAppendResult
    from shared.protocol.memory.sessions import SessionGcParams as SessionGcParams
    from shared.protocol.memory.sessions import SessionGcRequest as SessionGcRequest
    from shared.protocol.memory.sessions import SessionGcResult as SessionGcResult
    from shared.protocol.memory.sessions import SessionHistoryParams as SessionHistoryParams
    from shared.protocol.memory.sessions import SessionHistoryRequest as SessionHistoryRequest
    from shared.protocol.memory.sessions import SessionHistoryResult as SessionHistoryResult
    from shared.protocol.memory.sessions import SessionResolveParams as SessionResolveParams
    from shared.protocol.memory.sessions import SessionResolveRequest as SessionResolveRequest
    from shared.protocol.memory.sessions import SessionResolveResult as SessionResolveResult
    from shared.protocol.memory.sessions import StoredEntry as StoredEntry
    from shared.protocol.memory.sessions import TranscriptEntry as TranscriptEntry
    from shared.protocol.memory_terms import KINDS as KINDS
    from shared.protocol.memory_terms import MAX_HISTORY as MAX_HISTORY
    from shared.protocol.memory_terms import MAX_REINDEX_BATCH as MAX_REINDEX_BATCH
    from shared.protocol.memory_terms import MAX_SEARCH_LIMIT as MAX_SEARCH_LIMIT
    from shared.protocol.memory_terms import RECALL_MODES as RECALL_MODES
    from shared.protocol.memory_terms import Kind as Kind
    from shared.protocol.memory_terms import RecallMode as RecallMode

_OWNERS: dict[str, str] = {
    "MEMORY_EXTENSION": "shared.protocol.memory.methods",
    "SESSION_RESOLVE_METHOD": "shared.protocol.memory.methods",
    "SESSION_APPEND_METHOD": "shared.protocol.memory.methods",
    "SESSION_HISTORY_METHOD": "shared.protocol.memory.methods",
    "SESSION_GC_METHOD": "shared.protocol.memory.methods",
    "SEARCH_METHOD": "shared.protocol.memory.methods",
    "LIST_METHOD": "shared.protocol.memory.methods",
    "FORGET_METHOD": "shared.protocol.memory.methods",
    "EXPORT_METHOD": "shared.protocol.memory.methods",
    "IMPORT_METHOD": "shared.protocol.memory.methods",
    "REINDEX_METHOD": "shared.protocol.memory.methods",
    "ROLLBACK_METHOD": "shared.protocol.memory.methods",
    "HISTORY_METHOD": "shared.protocol.memory.methods",
    "STATS_METHOD": "shared.protocol.memory.methods",
    "CONSOLIDATE_METHOD": "shared.protocol.memory.methods",
    "METRICS_METHOD": "shared.protocol.memory.methods",
    "METHODS": "shared.protocol.memory.methods",
    "AGENT_META_KEY": "shared.protocol.memory.meta",
    "PROVENANCE_META_KEY": "shared.protocol.memory.meta",
    "Provenance": "shared.protocol.memory.meta",
    "PROVENANCES": "shared.protocol.memory.meta",
    "QUOTED_PROVENANCES": "shared.protocol.memory.meta",
    "AGENT_PATTERN": "shared.protocol.memory.meta",
    "AgentId": "shared.protocol.memory.meta",
    "tool_meta": "shared.protocol.memory.meta",
    "MAX_PAGE": "shared.protocol.memory.records",
    "MAX_IMPORT": "shared.protocol.memory.records",
    "MemoryRecord": "shared.protocol.memory.records",
    "ImportRecord": "shared.protocol.memory.records",
    "Role": "shared.protocol.memory.sessions",
    "ROLES": "shared.protocol.memory.sessions",
    "SESSION_KEY_MAX": "shared.protocol.memory.sessions",
    "MAX_APPEND": "shared.protocol.memory.sessions",
    "TranscriptEntry": "shared.protocol.memory.sessions",
    "StoredEntry": "shared.protocol.memory.sessions",
    "SessionResolveParams": "shared.protocol.memory.sessions",
    "SessionResolveResult": "shared.protocol.memory.sessions",
    "SessionAppendParams": "shared.protocol.memory.sessions",
    "SessionAppendResult": "shared.protocol.memory.sessions",
    "SessionHistoryParams": "shared.protocol.memory.sessions",
    "SessionHistoryResult": "shared.protocol.memory.sessions",
    "SessionGcParams": "shared.protocol.memory.sessions",
    "SessionGcResult": "shared.protocol.memory.sessions",
    "SessionResolveRequest": "shared.protocol.memory.sessions",
    "SessionAppendRequest": "shared.protocol.memory.sessions",
    "SessionHistoryRequest": "shared.protocol.memory.sessions",
    "SessionGcRequest": "shared.protocol.memory.sessions",
    "Promotion": "shared.protocol.memory.memory_md",
    "ConsolidateParams": "shared.protocol.memory.memory_md",
    "ConsolidateResult": "shared.protocol.memory.memory_md",
    "RollbackParams": "shared.protocol.memory.memory_md",
    "RollbackResult": "shared.protocol.memory.memory_md",
    "HistoryParams": "shared.protocol.memory.memory_md",
    "HistoryRevision": "shared.protocol.memory.memory_md",
    "HistoryResult": "shared.protocol.memory.memory_md",
    "ConsolidateRequest": "shared.protocol.memory.memory_md",
    "RollbackRequest": "shared.protocol.memory.memory_md",
    "HistoryRequest": "shared.protocol.memory.memory_md",
    "SearchParams": "shared.protocol.memory.admin",
    "SearchResult": "shared.protocol.memory.admin",
    "ListParams": "shared.protocol.memory.admin",
    "ListResult": "shared.protocol.memory.admin",
    "ForgetParams": "shared.protocol.memory.admin",
    "ForgetResult": "shared.protocol.memory.admin",
    "ExportParams": "shared.protocol.memory.admin",
    "ExportResult": "shared.protocol.memory.admin",
    "ImportParams": "shared.protocol.memory.admin",
    "ImportProblem": "shared.protocol.memory.admin",
    "ImportResult": "shared.protocol.memory.admin",
    "ReindexParams": "shared.protocol.memory.admin",
    "ReindexResult": "shared.protocol.memory.admin",
    "EmbedderInfo": "shared.protocol.memory.admin",
    "StatsParams": "shared.protocol.memory.admin",
    "StatsResult": "shared.protocol.memory.admin",
    "MetricsParams": "shared.protocol.memory.admin",
    "MetricsResult": "shared.protocol.memory.admin",
    "SearchRequest": "shared.protocol.memory.admin",
    "ListRequest": "shared.protocol.memory.admin",
    "ForgetRequest": "shared.protocol.memory.admin",
    "ExportRequest": "shared.protocol.memory.admin",
    "ImportRequest": "shared.protocol.memory.admin",
    "ReindexRequest": "shared.protocol.memory.admin",
    "StatsRequest": "shared.protocol.memory.admin",
    "MetricsRequest": "shared.protocol.memory.admin",
    "KINDS": "shared.protocol.memory_terms",
    "MAX_HISTORY": "shared.protocol.memory_terms",
    "MAX_REINDEX_BATCH": "shared.protocol.memory_terms",
    "MAX_SEARCH_LIMIT": "shared.protocol.memory_terms",
    "RECALL_MODES": "shared.protocol.memory_terms",
    "Kind": "shared.protocol.memory_terms",
    "RecallMode": "shared.protocol.memory_terms",
}
"""Each public name and the module that owns it."""

__all__ = sorted(_OWNERS)


def __getattr__(name: str) -> Any:
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(owner), name)
