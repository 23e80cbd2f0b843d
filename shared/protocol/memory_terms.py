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
