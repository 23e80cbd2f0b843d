"""Recall: keyword (FTS5 BM25), vector (cosine neighbours) or both fused by reciprocal rank.

Hybrid recall ranks each candidate by ``sum(1 / (60 + rank))`` over the two lists (reciprocal rank
fusion, Cormack et al. 2009, k = 60): no score of either side is compared with the other, so BM25's
unbounded scores and cosine distances need no calibration. When the vector side fails (the
embedder is down, the index errs, or the model changed and a reindex is pending) hybrid recall
degrades to keyword recall and logs a warning saying so; an explicit ``vector`` recall refuses.

User text never reaches FTS5 as syntax: :func:`fts_query` keeps only word characters and quotes
every term, so ``NEAR``, ``*``, ``:`` or an unbalanced quote are just text.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from servers.memory.embeddings import EmbeddingError
from servers.memory.errors import MemoryRefused
from servers.memory.models import Memory, Vector
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorDimensionError
from shared.protocol.memory import RecallMode

logger = logging.getLogger("nexo.memory.recall")

RRF_K = 60
MAX_TERMS = 32
MIN_CANDIDATES = 20
"""Keyword candidates per recall: max(3 x limit, this). BM25 candidates are cheap."""
MIN_NEIGHBOURS = 10
"""Vector candidates per recall: max(2 x limit, this). The index reranks ~40 float vectors per
neighbour asked for, so fewer are fetched than on the keyword side."""
_TERM = re.compile(r"\w+")

VectorBlocker = Callable[[], str | None]
"""Why vector search cannot run right now (e.g. a pending reindex), or None when it can."""


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for free text: its distinct words, each quoted, joined by OR.

    OR rather than AND because BM25 already ranks documents matching more terms higher, and hybrid
    recall wants candidates. None when the text holds no word at all.
    """
    terms: list[str] = []
    for term in _TERM.findall(text.casefold()):
        if term not in terms:
            terms.append(term)
        if len(terms) == MAX_TERMS:
            break
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion of several best-first id lists; ties keep the earlier best rank."""
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            scores[memory_id] = scores.get(memory_id, 0.0) + 1.0 / (k + rank)
            best[memory_id] = min(best.get(memory_id, rank), rank)
    return sorted(scores, key=lambda memory_id: (-scores[memory_id], best[memory_id], memory_id))


@dataclass(frozen=True, slots=True)
class Recalled:
    memories: list[Memory]
    mode: RecallMode
    """The mode actually used: ``keyword`` when a hybrid recall degraded."""


class Recaller:
    def __init__(
        self,
        store: MemoryStore,
        embed: Callable[[str], Awaitable[Vector]],
        *,
        vector_blocker: VectorBlocker = lambda: None,
    ) -> None:
        self._store = store
        self._embed = embed
        self._vector_blocker = vector_blocker

    async def recall(
        self,
        agent: str,
        query: str,
        *,
        mode: RecallMode,
        limit: int,
        include_archived: bool = False,
        touch: bool = True,
    ) -> Recalled:
        candidates = max(limit * 3, MIN_CANDIDATES)
        keyword: list[int] = []
        if mode != "vector":
            match = fts_query(query)
            if match is not None:
                keyword = await self._store.keyword(
                    agent, match, candidates, include_archived=include_archived
                )
        used: RecallMode = mode
        rankings = [keyword]
        if mode != "keyword":
            try:
                neighbours = max(limit * 2, MIN_NEIGHBOURS)
                rankings.append(await self._nearest(agent, query, neighbours, include_archived))
            except (EmbeddingError, VectorDimensionError, sqlite3.Error, _Blocked) as exc:
                if mode == "vector":
                    raise MemoryRefused(
                        f"vector recall is unavailable right now ({exc}); "
                        "call memory_recall again with mode='keyword' or mode='hybrid'"
                    ) from exc
                logger.warning(
                    "vector search failed for agent %s (%s); recall degraded to keyword search", agent, exc
                )
                used = "keyword"
        ranked = rrf([ranking for ranking in rankings if ranking])[:limit]
        found = await self._store.by_ids(agent, ranked, include_archived=include_archived)
        memories = [found[memory_id] for memory_id in ranked if memory_id in found]
        if touch:
            await self._store.touch([memory.id for memory in memories])
        return Recalled(memories, used)

    async def _nearest(self, agent: str, query: str, k: int, include_archived: bool) -> list[int]:
        blocked = self._vector_blocker()
        if blocked is not None:
            raise _Blocked(blocked)
        vector = await self._embed(query)
        return await self._store.nearest(agent, vector, k, include_archived=include_archived)


class _Blocked(Exception):
    """Vector search is switched off for a known reason (not a failure worth a traceback)."""
