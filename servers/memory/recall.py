"""Recall: keyword (FTS5 BM25), vector (cosine neighbours) or both fused by reciprocal rank.

Keyword queries leave out English stopwords (``servers.memory.stopwords``): a question's "me", "is"
or "what" match nearly every memory. Hybrid recall then fuses only *strong* keyword hits: a hit's
BM25 score over the query's total term weight (the sum of its terms' IDF, about what a memory
holding each term once scores) must reach ``STRONG_SHARE``. A memory sharing one common word with
a paraphrased question stays out, a memory holding the query's rare exact term (an error code, a
serial number) comes in. The lists are fused by weighted reciprocal rank fusion (Cormack et al.
2009, k = 60): each candidate scores ``1 / (60 + vector rank) + share / (60 + keyword rank)``, so no
cosine is compared with a BM25 score. Tuned, and checked on held-out questions, by
``python -m bench.recall_quality``.

When the vector side fails (the embedder is down, the index errs, or the model changed and a
reindex is pending) hybrid recall degrades to keyword recall, every keyword hit in BM25 order, and
logs a warning saying so; an explicit ``vector`` recall refuses.

User text never reaches FTS5 as syntax: :func:`fts_query` keeps only word characters and quotes
every term, so ``NEAR``, ``*``, ``:`` or an unbalanced quote are just text.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from servers.memory.embeddings import EmbeddingError
from servers.memory.errors import MemoryRefused
from servers.memory.models import Memory, Vector
from servers.memory.stopwords import STOPWORDS
from servers.memory.store import MemoryStore
from servers.memory.vectors import VectorDimensionError
from shared.protocol.memory import RecallMode

logger = logging.getLogger("nexo.memory.recall")

RRF_K = 60
MAX_TERMS = 32
MIN_CANDIDATES = 20
"""Keyword candidates per recall: max(3 x limit, this). BM25 candidates are cheap."""
STRONG_SHARE = 0.65
"""In hybrid recall, a keyword hit is fused only if its BM25 score reaches this share of the query's
total term weight (the sum of its terms' IDF, about what a memory holding every term once scores)."""
MIN_NEIGHBOURS = 10
"""Vector candidates per recall: max(2 x limit, this). The index reranks ~40 float vectors per
neighbour asked for, so fewer are fetched than on the keyword side."""
_TERM = re.compile(r"\w+")

VectorBlocker = Callable[[], str | None]
"""Why vector search cannot run right now (e.g. a pending reindex), or None when it can."""


def query_terms(text: str) -> list[str]:
    """The distinct words of ``text``, casefolded, without stopwords unless nothing else is left."""
    words: list[str] = []
    for word in _TERM.findall(text.casefold()):
        if word not in words:
            words.append(word)
    meaningful = [word for word in words if word not in STOPWORDS]
    return (meaningful or words)[:MAX_TERMS]


def quoted(term: str) -> str:
    """One term as an FTS5 string: never syntax."""
    return '"' + term.replace('"', '""') + '"'


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for free text: its :func:`query_terms`, each quoted, joined by OR.

    OR rather than AND because BM25 already ranks documents matching more terms higher, and hybrid
    recall wants candidates. None when the text holds no word at all.
    """
    terms = query_terms(text)
    return match_any(terms) if terms else None


def match_any(terms: Sequence[str]) -> str:
    """An FTS5 expression matching any of ``terms``, each quoted."""
    return " OR ".join(quoted(term) for term in terms)


def idf(documents: int, matching: int) -> float:
    """FTS5's BM25 inverse document frequency of a term found in ``matching`` of ``documents``."""
    return max(math.log((documents - matching + 0.5) / (matching + 0.5)), 1e-6)


def rrf(
    rankings: Sequence[Sequence[int]], k: int | None = None, weights: Sequence[Mapping[int, float]] = ()
) -> list[int]:
    """Reciprocal rank fusion of several best-first id lists; ties keep the earlier best rank.

    An id's share from ranking ``i`` is multiplied by ``weights[i][id]`` when given (1 otherwise).
    """
    k = RRF_K if k is None else k
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    for index, ranking in enumerate(rankings):
        weight = weights[index] if index < len(weights) else {}
        for rank, memory_id in enumerate(ranking, start=1):
            scores[memory_id] = scores.get(memory_id, 0.0) + weight.get(memory_id, 1.0) / (k + rank)
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
        terms = query_terms(query) if mode != "vector" else []
        hits: list[tuple[int, float]] = []
        if terms:
            hits = await self._store.keyword(
                agent, match_any(terms), candidates, include_archived=include_archived
            )
        used: RecallMode = mode
        nearest: list[int] | None = None
        if mode != "keyword":
            try:
                nearest = await self._nearest(agent, query, max(limit * 2, MIN_NEIGHBOURS), include_archived)
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
        if nearest is None:
            ranked = [memory_id for memory_id, _ in hits][:limit]
        else:
            strong = await self._strong(terms, hits) if hits else {}
            ranked = rrf([list(strong), nearest], weights=[strong])[:limit]
        found = await self._store.by_ids(agent, ranked, include_archived=include_archived)
        memories = [found[memory_id] for memory_id in ranked if memory_id in found]
        if touch:
            await self._store.touch([memory.id for memory in memories])
        return Recalled(memories, used)

    async def _strong(self, terms: list[str], hits: list[tuple[int, float]]) -> dict[int, float]:
        """The keyword hits that score enough of the query's weight to be fused, weighted by that share."""
        documents, matching = await self._store.term_frequencies([quoted(term) for term in terms])
        weight = sum(idf(documents, count) for count in matching)
        shares = {memory_id: score / weight for memory_id, score in hits}
        return {memory_id: share for memory_id, share in shares.items() if share >= STRONG_SHARE}

    async def _nearest(self, agent: str, query: str, k: int, include_archived: bool) -> list[int]:
        blocked = self._vector_blocker()
        if blocked is not None:
            raise _Blocked(blocked)
        vector = await self._embed(query)
        return await self._store.nearest(agent, vector, k, include_archived=include_archived)


class _Blocked(Exception):
    """Vector search is switched off for a known reason (not a failure worth a traceback)."""
