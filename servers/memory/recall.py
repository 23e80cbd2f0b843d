"""Recall: keyword (FTS5 BM25), vector (cosine neighbours) or both, the vector side deciding.

Every memory of the agent is searched, archived ones too: archiving (consolidation's working set)
decides what is promoted to MEMORY.md, never what can be found. A recalled archived memory rejoins
the working set.

The keyword query holds the question's informative terms only, the rarest first, and ranks a
bounded number of candidates (``servers.memory.keyword``). Hybrid recall then uses only *strong*
keyword hits: a hit's BM25 score over the query's total term weight (the sum of its terms' IDF,
about what a memory holding each term once scores) must reach ``STRONG_SHARE``. A memory sharing
one common word with a paraphrased question stays out, a memory holding the query's rare exact
term (an error code, a serial number) comes in.

Hybrid order is by cosine similarity, the strong keyword hits' own cosines read from the index
when the vector side did not return them, and a strong hit counts ``TIE_MARGIN`` (0.02) more. The
keyword side so settles what the embedding model leaves undecided and never overturns a clear
preference: fusing by reciprocal rank alone let a memory the vector side ranked second, sharing
one rare word with the question, overtake a first that was well ahead in cosine. Two exceptions:
an exact lookup, when a single memory holds every term of the query and is a strong hit, comes
first whatever its cosine (a serial number embeds as noise); and keyword recall's best two strong
hits keep the last places when the fusion left them out (``KEYWORD_PLACES``). The keyword side
ranks as keyword recall does, and reads past its first candidates only what can change the
results (``servers.memory.hybrid_keyword``). Tuned, and checked on held-out questions, by
``python -m bench.recall_quality``.

When the vector side fails (the embedder is down, the index errs, or the model changed and a
reindex is pending) hybrid recall degrades to keyword recall, every keyword hit in BM25 order, and
logs a warning saying so; an explicit ``vector`` recall refuses.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import anyio

from servers.memory import hybrid_keyword
from servers.memory.embeddings import EmbeddingError
from servers.memory.errors import MemoryRefused, VectorDimensionError
from servers.memory.keyword import CANDIDATE_CAP, PROBE, KeywordQuery, keyword_query
from servers.memory.keyword_rank import RANK_CAP
from servers.memory.models import Memory, Vector
from servers.memory.store import MemoryStore
from shared.protocol.memory_terms import RecallMode

logger = logging.getLogger("nexo.memory.recall")

MIN_CANDIDATES = 20
"""Keyword candidates per recall: max(3 x limit, this). BM25 candidates are cheap."""
STRONG_SHARE = 0.65
"""In hybrid recall, a keyword hit is strong, and counts, only if its BM25 score reaches this share
of the query's total term weight (the sum of its terms' IDF, about what a memory holding every term
once scores)."""
TIE_MARGIN = 0.02
"""In hybrid recall, what a strong keyword hit adds to its cosine similarity: it settles a near tie
of the vector side, never a clear preference. On the tuning questions the vector side's first and
second were equally often right when their cosines were less than 0.02 apart, and the second never
was when they were further apart."""
MIN_NEIGHBOURS = 10
"""Vector recall's candidates: max(2 x limit, this), of which the first ``limit`` are returned. The
index reranks 20 to 30 float vectors per neighbour asked for (``vector_search.rerank_rows``), so
fewer are fetched than on the keyword side.

Hybrid recall asks for ``limit``: a memory past them that is no strong hit cannot be among its
results, and its keyword side reads the cosine of every strong hit that can. Its vector side so
reranks half as many rows. At a million memories that is about 2 ms less per question; the
index's top ten then agreed with exact search for 0.994 of its memories instead of 0.998 (120
questions), and hybrid's results for the 650 questions of ``bench.recall_scale`` did not change."""

KEYWORD_PLACES = 2
"""In hybrid recall, keyword recall's best this-many strong hits are always among the results. The
fusion leaves a strong hit out only when ten memories or more are nearer in cosine: near-duplicates
of one another (one sentence of a manual found in many), of which the one worded as the question is
the likeliest asked for. Measured at a million memories (``bench.recall_scale``), the target among
ten results: 0.978 of the questions without these places, 0.994 with them; 0.692 and 0.865 of the
4-word questions. They take the last places, never the first."""

VectorBlocker = Callable[[], str | None]
"""Why vector search cannot run right now (e.g. a pending reindex), or None when it can."""


def fuse(neighbours: Mapping[int, float], strong: Collection[int], lookup: int | None = None) -> list[int]:
    """Hybrid order: by cosine similarity, a strong keyword hit counting ``TIE_MARGIN`` more.

    ``neighbours`` maps every candidate (the vector neighbours and the strong keyword hits) to its
    cosine similarity with the query; ``lookup``, when given, goes first. Ties keep the lower id.
    """
    score = {
        memory_id: cosine + (TIE_MARGIN if memory_id in strong else 0.0)
        for memory_id, cosine in neighbours.items()
    }
    ranked = sorted(score, key=lambda memory_id: (-score[memory_id], memory_id))
    if lookup is None:
        return ranked
    return [lookup, *(memory_id for memory_id in ranked if memory_id != lookup)]


def keyword_places(limit: int) -> int:
    """How many of hybrid recall's ``limit`` results keyword recall's best strong hits keep: up to
    ``KEYWORD_PLACES``, and never more than a quarter of them (none below four)."""
    return min(KEYWORD_PLACES, limit // 4)


def with_places_kept(ranked: Sequence[int], kept: Sequence[int], limit: int) -> list[int]:
    """The first ``limit`` of ``ranked``, each of ``kept`` they leave out taking one of the last
    places (in the order of ``kept``), from the last of the others back."""
    top = list(ranked[:limit])
    missing = [memory_id for memory_id in kept if memory_id not in top]
    room = limit - len(top)
    for _ in range(max(0, len(missing) - room)):
        last_other = max(n for n, memory_id in enumerate(top) if memory_id not in kept)
        del top[last_other]
    return top + missing


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
        keyword_probe: int = PROBE,
        keyword_cap: int = CANDIDATE_CAP,
        rank_cap: int = RANK_CAP,
        keyword_fts5: bool = True,
    ) -> None:
        self._store = store
        self._embed = embed
        self._vector_blocker = vector_blocker
        self._keyword_probe = keyword_probe
        self._keyword_cap = keyword_cap
        self._rank_cap = rank_cap
        self._keyword_fts5 = keyword_fts5

    async def recall(
        self, agent: str, query: str, *, mode: RecallMode, limit: int, touch: bool = True
    ) -> Recalled:
        used: RecallMode = mode
        if mode == "keyword":
            ranked = await self._keyword_ranked(agent, query, limit)
        elif mode == "vector":
            vector = await self._query_vector(agent, query, mode)
            assert vector is not None  # a vector recall refuses rather than degrades
            neighbours = await self._neighbours(agent, vector, mode, limit)
            ranked = [memory_id for memory_id, _ in neighbours or []][:limit]
        else:
            ranked, used = await self._hybrid(agent, query, limit)
        found = await self._store.by_ids(agent, ranked)
        memories = [found[memory_id] for memory_id in ranked if memory_id in found]
        if touch:
            self._store.touch([memory.id for memory in memories])
        return Recalled(memories, used)

    async def _keywords(self, query: str) -> KeywordQuery | None:
        return await keyword_query(
            query, self._store.term_documents, probe=self._keyword_probe, cap=self._keyword_cap
        )

    async def _keyword_ranked(self, agent: str, query: str, limit: int) -> list[int]:
        """Keyword recall: every hit in BM25 order."""
        keywords = await self._keywords(query)
        if keywords is None:
            return []
        found = await self._store.keyword(
            agent, keywords, max(limit * 3, MIN_CANDIDATES), cap=self._rank_cap, allow_fts5=self._keyword_fts5
        )
        return [memory_id for memory_id, _ in found.hits][:limit]

    async def _hybrid(self, agent: str, query: str, limit: int) -> tuple[list[int], RecallMode]:
        """Hybrid recall, or keyword recall when the vector side is unavailable.

        The keyword side ranks its candidates (the full-text index, then their text, on the
        read-only connection's thread) while the query is embedded on the model's; the vector side
        searches once the vector is there and the keyword side has ranked
        (``servers.memory.hybrid_keyword``): its scan takes both cores, and sharing them with the
        ranking's reads cost a question at a million memories 1.6 to 3.3 ms more CPU. A failure of
        either side is raised as itself, not in an exception group.
        """
        vector: Vector | None = None
        neighbours: list[tuple[int, float]] | None = None
        ranking: hybrid_keyword.Ranking | None = None
        failures: list[Exception] = []

        ranked = anyio.Event()

        async def vector_side() -> None:
            nonlocal vector, neighbours
            try:
                vector = await self._query_vector(agent, query, "hybrid")
                await ranked.wait()
                if vector is not None:
                    neighbours = await self._neighbours(agent, vector, "hybrid", limit)
            except Exception as exc:  # noqa: BLE001 -- re-raised below with its own type
                failures.append(exc)

        async def keyword_side() -> None:
            nonlocal ranking
            try:
                keywords = await self._keywords(query)
                if keywords is not None:
                    ranking = await hybrid_keyword.rank(
                        self._store.reads,
                        agent,
                        keywords,
                        partial(self._store.holders, agent),
                        least=STRONG_SHARE,
                        wanted=max(limit * 3, MIN_CANDIDATES),
                        cap=self._rank_cap,
                        allow_fts5=self._keyword_fts5,
                    )
            except Exception as exc:  # noqa: BLE001 -- re-raised below with its own type
                failures.append(exc)
            finally:
                ranked.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(vector_side)
            tg.start_soon(keyword_side)
        if failures:
            raise failures[0]
        if vector is None or neighbours is None:
            return await self._keyword_ranked(agent, query, limit), "keyword"
        if ranking is None:
            return [memory_id for memory_id, _ in neighbours][:limit], "hybrid"
        pruned = await hybrid_keyword.strong_hits(
            self._store.reads,
            agent,
            ranking,
            neighbours,
            partial(self._store.ceilings, agent, vector),
            partial(self._store.similarities, agent, vector, reader=True),
            partial(self._store.holders, agent),
            limit=limit,
            margin=TIE_MARGIN,
            fuse=fuse,
        )
        fused = fuse(dict(neighbours) | pruned.similarity, pruned.strong, pruned.lookup)
        best = [memory_id for memory_id, _ in ranking.strong[: keyword_places(limit)]]
        return with_places_kept(fused, best, limit), "hybrid"

    async def _query_vector(self, agent: str, query: str, mode: RecallMode) -> Vector | None:
        """The query's vector; None when a hybrid recall must degrade (a vector recall refuses)."""
        try:
            return await self._embed_query(query)
        except (EmbeddingError, VectorDimensionError, _Blocked) as exc:
            self._unavailable(agent, mode, exc)
            return None

    async def _neighbours(
        self, agent: str, vector: Vector, mode: RecallMode, limit: int
    ) -> list[tuple[int, float]] | None:
        """The nearest memories (``MIN_NEIGHBOURS`` says how many); None when a hybrid recall must
        degrade (a vector recall refuses)."""
        try:
            k = limit if mode == "hybrid" else max(limit * 2, MIN_NEIGHBOURS)
            return await self._store.neighbours(agent, vector, k)
        except (VectorDimensionError, sqlite3.Error) as exc:
            self._unavailable(agent, mode, exc)
            return None

    @staticmethod
    def _unavailable(agent: str, mode: RecallMode, exc: Exception) -> None:
        if mode == "vector":
            raise MemoryRefused(
                f"vector recall is unavailable right now ({exc}); "
                "call memory_recall again with mode='keyword' or mode='hybrid'"
            ) from exc
        logger.warning(
            "vector search failed for agent %s (%s); recall degraded to keyword search", agent, exc
        )

    async def _embed_query(self, query: str) -> Vector:
        blocked = self._vector_blocker()
        if blocked is not None:
            raise _Blocked(blocked)
        return await self._embed(query)


class _Blocked(Exception):
    """Vector search is switched off for a known reason (not a failure worth a traceback)."""
