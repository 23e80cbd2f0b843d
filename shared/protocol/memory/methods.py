"""The memory server's extension name and its control-plane methods (names only, no models).

Each method is a custom JSON-RPC request under ``nexo/memory/``, so none of them reaches any model's
tool list. Send one with ``client.session.send_request(Request(params=...), Result)``; the request,
params and result models are in :mod:`~shared.protocol.memory.sessions`,
:mod:`~shared.protocol.memory.admin` and :mod:`~shared.protocol.memory.memory_md`.
"""

from __future__ import annotations

MEMORY_EXTENSION = "nexo/memory"

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
