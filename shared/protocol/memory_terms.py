"""The memory server's vocabulary and limits, without the wire models.

What a command line needs to check its arguments (kinds, recall modes, the largest limits) costs no
import of the MCP types here; :mod:`shared.protocol.memory` builds its models on the same values.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["fact", "preference", "event", "note", "person", "procedure"]
KINDS: tuple[Kind, ...] = ("fact", "preference", "event", "note", "person", "procedure")

RecallMode = Literal["hybrid", "keyword", "vector"]
RECALL_MODES: tuple[RecallMode, ...] = ("hybrid", "keyword", "vector")

MAX_SEARCH_LIMIT = 50
MAX_REINDEX_BATCH = 512
MAX_HISTORY = 1000
"""The most MEMORY.md revisions one history request returns."""

SEARCH_METHOD = "nexo/memory/search"
LIST_METHOD = "nexo/memory/list"
FORGET_METHOD = "nexo/memory/forget"
HISTORY_METHOD = "nexo/memory/history"
ROLLBACK_METHOD = "nexo/memory/rollback"
STATS_METHOD = "nexo/memory/stats"
METRICS_METHOD = "nexo/memory/metrics"
OPERATOR_METHODS = (
    SEARCH_METHOD,
    LIST_METHOD,
    FORGET_METHOD,
    HISTORY_METHOD,
    ROLLBACK_METHOD,
    STATS_METHOD,
    METRICS_METHOD,
)
"""What ``nexo memory`` asks of the running daemon (its models: :mod:`shared.protocol.memory`)."""
FOR_ONE_AGENT = frozenset({SEARCH_METHOD, HISTORY_METHOD, ROLLBACK_METHOD})
"""Requests about one agent's memory: when the operator names none, the config's first agent."""
OPERATOR_SERVER = "memory"
"""The server ``nexo memory`` talks to: the one named ``memory`` in the config."""
