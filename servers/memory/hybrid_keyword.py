"""Hybrid recall's keyword side: keyword recall's own ranking, and the strong hits that can change it.

Fused (``servers.memory.recall``), a keyword hit counts only when it is *strong*, and then only by
``TIE_MARGIN`` added to its cosine similarity, or as the exact lookup; and keyword recall's best
strong hits keep places of their own among the results. So the keyword side:

1. ranks its candidates exactly as keyword recall does, while the question is embedded: the
   memories holding a rare term of the question (``keyword_rank.rare_first``) that could be strong
   at all (``keyword_rank.reachable``), the first ``cap`` of them by the weight of the rare terms
   they hold, their text read and scored (``servers.memory.bm25``), or, where that costs more
   (``keyword_rank.fts5_is_cheaper``: a small store), every strong hit by FTS5's ``bm25()`` and
   up to two memories holding every term; a question of common words
   only (``KeywordQuery.window``) takes the newest memories holding every term, then, when fewer
   than the keyword ranking keeps are the agent's, the newest holding any (each a window long,
   every one read);
2. once the vector side has answered, reads the candidates past ``cap`` only where they could enter
   the first ``limit`` results: a memory's fused score is at most its cosine plus ``TIE_MARGIN``,
   and the ``limit``-th fused score is at least the ``limit``-th neighbour's cosine, so a candidate
   whose cosine bound (its int8 vector, ``servers.memory.vector_q8``) is below that cut less the
   margin is never among the results, strong or not;
3. reads the exact cosine of the strong hits the vector side did not return and whose bound reaches
   that cut;
4. the exact lookup (one memory holding every term, and strong, comes first) can only change the
   result when the fused first memory does not hold every term: if it does, it is either that one
   memory, first already, or one of several, and there is no lookup. Only then are the candidates
   past ``cap`` holding every rare term read, until two hold every term.

The same results as fusing every candidate (``tests/servers/memory/test_hybrid_keyword.py`` checks
them against a brute-force fusion on random stores).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from servers.memory.keyword import KeywordQuery, Term
from servers.memory.keyword_rank import (
    Hit,
    Scored,
    Totals,
    fts5_bm25,
    fts5_is_cheaper,
    newest_scored,
    rare_first,
    reachable,
    score_texts,
    term_weights,
    totals,
)
from shared.db import Reads

Cosines = Callable[[Sequence[int]], Awaitable[dict[int, float]]]
"""Per id that is the agent's memory, its cosine similarity to the question (or a bound of it)."""


@dataclass(frozen=True, slots=True)
class Ranking:
    """Step 1 of the module docstring: the keyword side before the vector side has answered."""

    query: KeywordQuery
    weights: list[tuple[Term, float]]
    indexed: Totals
    floor: float
    """What a strong hit scores at least: a share of the query's total term weight (a memory of the
    average length holding each term once scores that total)."""
    hits: list[Hit]
    """The agent's candidates read, best first: keyword recall's ranking (with FTS5's ranking, its
    strong hits only)."""
    whole: list[int]
    """The agent's memories known to hold every term: those read that do (with FTS5's ranking, up
    to two of all that do)."""
    ids: list[int]
    """Every candidate: with rare terms, best partial score first (the weights of the rare terms
    each holds); with common words only, the newest holding every term (none with FTS5's ranking)."""
    unread: list[int]
    """The candidates past ``cap``, in the same order (only with rare terms)."""
    partial: dict[int, float]
    """The partial score of each candidate with rare terms."""

    @property
    def strong(self) -> list[Hit]:
        """The strong hits read, best first."""
        return [hit for hit in self.hits if hit[1] >= self.floor]


async def rank(
    db: Reads,
    agent: str,
    query: KeywordQuery,
    holding_every_term: Callable[[str, int], Awaitable[list[int]]],
    *,
    least: float,
    wanted: int,
    cap: int,
    allow_fts5: bool = True,
) -> Ranking:
    """Step 1 of the module docstring; ``least``: a strong hit's share of the total term weight;
    ``wanted``: the hits keyword recall keeps; ``holding_every_term(match, k)``: up to ``k`` of the
    agent's memories matching ``match``; ``allow_fts5=False`` always reads the candidates' text."""
    indexed = await totals(db)
    weights = term_weights(query, indexed)
    floor = least * sum(weight for _, weight in weights)
    if query.window is None and allow_fts5 and fts5_is_cheaper(query, cap):
        # As keyword recall ranks where counting the terms costs less than reading the candidates:
        # every strong hit scored by FTS5, and whether one memory alone holds every term.
        hits = await fts5_bm25(db, agent, query, least=floor)
        return Ranking(
            query, weights, indexed, floor, hits, await holding_every_term(query.match_all, 2), [], [], {}
        )
    if query.window is None:
        ranked, partial = await rare_first(db, query, weights)
        ids = reachable(ranked, partial, query, weights, least)
        scored = await score_texts(db, agent, ids, weights, indexed, cap)
        return Ranking(
            query, weights, indexed, floor, scored.hits, scored.whole, ids, ids[scored.consumed :], partial
        )
    # At most a window each: every one is read, whatever the cap.
    window = await newest_scored(db, agent, query, weights, indexed, wanted)
    hits, whole = window.holding_all.hits, window.holding_all.whole
    if window.holding_any is not None:
        hits = sorted([*hits, *window.holding_any.hits], key=lambda hit: (-hit[1], -hit[0]))
        whole = [*whole, *window.holding_any.whole]
    return Ranking(query, weights, indexed, floor, hits, whole, window.ids, [], {})


@dataclass(frozen=True, slots=True)
class StrongHits:
    strong: set[int]
    """The strong hits that can be among the results."""
    similarity: dict[int, float]
    """Their cosine similarities, for those the vector side did not return."""
    lookup: int | None
    """The one memory holding every term of the query, when it is a strong hit (hybrid's exact lookup)."""


async def strong_hits(
    db: Reads,
    agent: str,
    ranking: Ranking,
    neighbours: Sequence[tuple[int, float]],
    ceilings: Cosines,
    cosines: Cosines,
    holding_every_term: Callable[[str, int], Awaitable[list[int]]],
    *,
    limit: int,
    margin: float,
    fuse: Callable[[Mapping[int, float], Collection[int]], list[int]],
) -> StrongHits:
    """Steps 2 to 4 of the module docstring; ``neighbours``: the vector side's, best first;
    ``ceilings`` and ``cosines``: bounds of the candidates' cosines and the cosines themselves;
    ``holding_every_term(match, k)``: up to ``k`` of the agent's memories matching ``match``."""
    returned = dict(neighbours)
    cut = neighbours[limit - 1][1] - margin if len(neighbours) >= limit else float("-inf")
    strong = {memory_id for memory_id, _ in ranking.strong}
    holders = set(ranking.whole)
    read = {memory_id for memory_id, _ in ranking.hits}
    if ranking.unread:
        bound = await ceilings([i for i in ranking.unread if i not in returned])
        relevant = [i for i in ranking.unread if i in returned or bound.get(i, cut - 1.0) >= cut]
        more = await _scored(db, agent, ranking, relevant)
        strong |= {memory_id for memory_id, score in more.hits if score >= ranking.floor}
        holders |= set(more.whole)
        read |= set(relevant)
    unknown = [memory_id for memory_id in strong if memory_id not in returned]
    bound = await ceilings(unknown)
    kept = await cosines([memory_id for memory_id in unknown if bound.get(memory_id, cut - 1.0) >= cut])
    if ranking.query.prefixed:
        return StrongHits(strong, kept, None)
    first = fuse(returned | kept, strong)[:1]
    if first and first[0] in holders:
        return StrongHits(strong, kept, None)  # step 4: the lookup would change nothing
    lookup = await _lookup(db, agent, ranking, read, holders, holders & strong, holding_every_term)
    return StrongHits(strong, kept, lookup)


async def _lookup(
    db: Reads,
    agent: str,
    ranking: Ranking,
    read: set[int],
    holders: set[int],
    strong_holders: set[int],
    holding_every_term: Callable[[str, int], Awaitable[list[int]]],
) -> int | None:
    """Step 4: the one memory holding every term when it is a strong hit; ``holders`` and
    ``strong_holders``: those found among the texts ``read`` already."""
    # Holding every term, a memory holds every rare one: its partial score is their whole weight.
    rare = {w.term for w in ranking.query.terms}
    full = sum(weight for term, weight in ranking.weights if term in rare) * (1 - 1e-9)
    unread = [i for i in ranking.unread if ranking.partial[i] >= full and i not in read]
    start, chunk = 0, _LOOKUP_FIRST
    while start < len(unread) and len(holders) < 2:
        more = await _scored(db, agent, ranking, unread[start : start + chunk])
        holders |= set(more.whole)
        strong_holders |= {memory_id for memory_id, score in more.hits if score >= ranking.floor}
        start, chunk = start + chunk, chunk * 2
    window = ranking.query.window
    if len(holders) == 1 and window is not None and len(ranking.ids) >= window:
        # The newest ``window`` holders were read: older ones may hold every term too.
        holders |= set(await holding_every_term(ranking.query.match_all, 2))
    return next(iter(holders)) if len(holders) == 1 and holders <= strong_holders else None


_LOOKUP_FIRST = 8
"""Texts read by the first statement looking for the memories holding every term past ``cap``
(step 4), twice as many by each next one: two holders end the search."""


async def _scored(db: Reads, agent: str, ranking: Ranking, ids: list[int]) -> Scored:
    return await score_texts(db, agent, ids, ranking.weights, ranking.indexed)
